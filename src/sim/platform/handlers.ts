// One handler per operation of the table; the compiler checks that none is missing.
import type { OperationName } from '../../platform/operations.ts';
import * as accounts from './accounts.ts';
import type { Handler } from './context.ts';
import * as dict from './dictionaries.ts';
import * as draws from './draws.ts';
import * as inst from './instances.ts';
import * as open from './open.ts';

export const handlers: { [N in OperationName]: Handler<N> } = {
  GetAppInfo: dict.getAppInfo,
  GetArea: dict.getArea,
  GetCityList: dict.getCityList,
  GetProjectList: dict.getProjectList,
  GetProductStock: dict.getProductStock,
  GetProductInfo: dict.getProductInfo,
  ProductAreaList: dict.productAreaList,
  InstanceOpen: open.instanceOpen,
  GetOrder: inst.getOrder,
  GetInstance: inst.getInstance,
  ChangeProxy: inst.changeProxy,
  InstanceRenew: inst.instanceRenew,
  InstanceRelease: inst.instanceRelease,
  InstanceAfterSale: inst.instanceAfterSale,
  GetAssignIpInfo: open.getAssignIpInfo,
  InstanceOpenAssignIp: open.instanceOpenAssignIp,
  ResetProxyPassword: inst.resetProxyPassword,
  CreateUser: accounts.createUser,
  UserAuth: accounts.userAuth,
  CreateProxyUser: accounts.createProxyUser,
  ProxyInfo: accounts.proxyInfo,
  DrawByPwd: draws.drawByPwd,
  DrawByApi: draws.drawByApi,
  AddIpWhiteList: accounts.addIpWhiteList,
  DelIpWhiteList: accounts.delIpWhiteList,
  SetProxyUserFlowLimit: accounts.setProxyUserFlowLimit,
  GetProxyUserInfo: accounts.getProxyUserInfo,
  ProxyFlowUseLog: accounts.proxyFlowUseLog,
  DynamicProxyReturn: accounts.dynamicProxyReturn,
};
