// One valid request and one seed-shaped answer per operation (values typed as the seed types them, so the
// lenient schemas return them unchanged). `wire` is what must arrive at the platform when it differs from
// the request (sessTime is sent as a string).
import type { OperationName, OpRequest } from '../../src/platform/operations.ts';

export interface Sample<N extends OperationName> {
  request: OpRequest<N>;
  wire?: unknown;
  /** undefined: the platform answers without data. */
  response: unknown;
}

const instance = {
  instanceNo: 'I20240701000001',
  proxyType: 101,
  asnType: 1,
  protocol: '1,2',
  ip: '203.0.113.7',
  port: 1080,
  regionId: 'r1',
  countryCode: 'USA',
  cityCode: 'USA000001',
  useType: '1',
  username: 'u1',
  pwd: 'p1',
  orderNo: 'O1',
  userExpired: 1780000000,
  flowTotal: 0,
  flowBalance: 0,
  status: 3,
  bridges: [],
  openAt: '2026-07-01T00:00:00Z',
  renewAt: '2026-07-01T00:00:00Z',
  releaseAt: '',
  productNo: 'P-STATIC-1',
  extendIp: '',
  projectId: '',
};

const product = {
  productNo: 'P-DYN-1',
  proxyType: 104,
  useType: '1',
  protocol: '1',
  useLimit: 3,
  sellLimit: 3,
  countryCode: '',
  stateCode: '',
  cityCode: '',
  costPrice: '0.01',
  inventory: 1000,
  duration: 0,
  unit: 10,
  flow: 1024,
  enable: 1,
  proxyUserFlowLimit: 1,
  pwdDrawSessionRange: '1-120',
  flowConversionBase: 1024,
  changeProxy: -1,
  productType: 1,
};

const accepted = { orderNo: 'O20260701000001', appOrderNo: 'm-0001', amount: '12.50' };

export const SAMPLES: { [N in OperationName]: Sample<N> } = {
  GetAppInfo: {
    request: {},
    response: { appName: 'shop', coin: '100.00', credit: '0.00', useBridge: 1, callbackUrl: 'http://127.0.0.1/cb', status: 1 },
  },
  GetArea: {
    request: { codes: null },
    response: [{ code: 'AS', name: 'Asia', cname: '亚洲', children: [{ code: 'JPN', name: 'Japan', cname: '日本', children: [] }] }],
  },
  GetCityList: {
    request: { codes: ['USA000001'] },
    response: [
      {
        cityCode: 'USA000001',
        cityName: '纽约',
        cityEnName: 'New York',
        stateCode: 'USA001',
        countryCode: 'USA',
        areaCode: 'NA',
        status: 1,
      },
    ],
  },
  GetProjectList: { request: {}, response: [{ code: 'tiktok', name: 'TikTok', status: 1 }] },
  GetProductStock: { request: { proxyType: [104, 105], countryCode: 'USA' }, response: [product] },
  GetProductInfo: { request: { productNo: 'P-DYN-1' }, response: product },
  ProductAreaList: {
    request: { productNo: 'P-DYN-1', proxyType: 104 },
    response: [
      {
        productNo: '',
        proxyType: 104,
        areaCode: 'NA',
        countryCode: 'USA',
        stateCode: 'USA000',
        cityCode: '',
        status: 1,
        region: 'us',
        supplierCode: 's1',
      },
    ],
  },
  InstanceOpen: {
    request: { appOrderNo: 'm-0001', params: [{ productNo: 'P-STATIC-1', count: 2, cycleTimes: 1 }] },
    response: accepted,
  },
  GetOrder: {
    request: { appOrderNo: 'm-0001', page: 1, pageSize: 10 },
    response: {
      orderNo: 'O20260701000001',
      appOrderNo: 'm-0001',
      type: 1,
      status: 3,
      count: 1,
      amount: '12.50',
      refund: 0,
      page: 1,
      pageSize: 10,
      total: 1,
      instances: [instance],
    },
  },
  GetInstance: { request: { instances: ['I20240701000001'] }, response: [instance] },
  ChangeProxy: {
    request: { instanceNo: 'I20240701000001', appOrderNo: 'chg-0001', reason: 'slow' },
    response: { orderNo: 'O-CHG-1', appOrderNo: 'chg-0001', instanceNo: 'I20240701000001', status: 1 },
  },
  InstanceRenew: { request: { appOrderNo: 'm-0002', instances: [{ instanceNo: 'I20240701000001', cycleTimes: 1 }] }, response: accepted },
  InstanceRelease: { request: { orderNo: 'm-0003', instances: ['I20240701000001'] }, response: accepted },
  InstanceAfterSale: {
    request: { orderNo: 'm-0004', instances: ['I20240701000001'], reason: 'network down', remark: 'x' },
    response: accepted,
  },
  GetAssignIpInfo: { request: { ip: '203.0.113.9' }, response: { ip: '203.0.113.9', canBuyStatus: true } },
  InstanceOpenAssignIp: {
    request: { appOrderNo: 'm-0005', productNo: 'P-STATIC-1', cycleTimes: 1, assignIp: '203.0.113.9' },
    response: accepted,
  },
  ResetProxyPassword: {
    request: { resetNo: 'reset_0001', instanceNoList: ['I20240701000001'] },
    response: { resetNo: 'reset_0001', list: [{ instanceNo: 'I20240701000001', newPassword: 'np', status: 3 }] },
  },
  CreateUser: {
    request: { appUsername: 'shop1', password: 'pw', status: 1 },
    response: { appUsername: 'shop1', username: 'plat_shop1', password: 'pw', status: 1, authStatus: 1 },
  },
  UserAuth: { request: { appUsername: 'shop1', authType: 2, authName: 'A. Person' }, response: { username: 'plat_shop1', authStatus: 2 } },
  CreateProxyUser: {
    request: { appUsername: 'alice', password: 'pw', limitFlow: 100, appMainUsername: 'shop1', status: 1 },
    response: { appUsername: 'alice', username: 'plat_alice', password: 'pw', status: 1, authStatus: 1 },
  },
  ProxyInfo: {
    request: { appUsername: 'shop1', proxyType: 104, productNo: 'P-DYN-1' },
    response: {
      list: [{ used: 10, total: 1024, balance: 1014, productNo: 'P-DYN-1', ipWhiteList: ['198.51.100.1'], ipUsed: 0, ipTotal: 0 }],
    },
  },
  DrawByPwd: {
    request: { appUsername: 'alice', addressCode: 'USA', sessTime: 10, num: 1, proxyType: 104, productNo: 'P-DYN-1' },
    wire: { appUsername: 'alice', addressCode: 'USA', sessTime: '10', num: 1, proxyType: 104, productNo: 'P-DYN-1' },
    response: { list: [{ proxyUrl: 'socks5://a:b@127.0.0.1:1080', list: ['127.0.0.1:1080:a:b'] }] },
  },
  DrawByApi: {
    request: { appUsername: 'shop1', proxyType: 104, num: 5, protocol: 'socks5', returnType: 'txt', delimiter: 4, productNo: 'P-DYN-1' },
    response: { list: [{ proxyUrl: 'http://127.0.0.1:9/extract?key=k' }] },
  },
  AddIpWhiteList: {
    request: { appUsername: 'shop1', ip: '198.51.100.1', proxyType: 104, productNo: 'P-DYN-1' },
    response: { ipWhiteList: ['198.51.100.1'] },
  },
  DelIpWhiteList: { request: { appUsername: 'shop1', ip: '198.51.100.1', productNo: 'P-DYN-1' }, response: { ipWhiteList: [] } },
  SetProxyUserFlowLimit: {
    request: { appUsername: 'alice', productNo: 'P-DYN-1', limitFlow: 1_024_000, remark: 'cap' },
    response: undefined,
  },
  GetProxyUserInfo: {
    request: { appUsername: 'alice', productNo: 'P-DYN-1' },
    response: {
      appUsername: 'alice',
      productNo: 'P-DYN-1',
      username: 'plat_alice',
      password: 'pw',
      status: 1,
      remark: '',
      limitFlow: -1,
      useFlow: 2048,
    },
  },
  ProxyFlowUseLog: {
    request: {
      appUsername: 'shop1',
      startTime: '2026-07-01 00:00:00',
      endTime: '2026-07-02 00:00:00',
      productNo: 'P-DYN-1',
      page: 1,
      pageSize: 100,
    },
    response: { total: 1, curPage: 1, list: [{ used: 1024, total: 2048, balance: 1024, usedTime: 1780000000, productNo: 'P-DYN-1' }] },
  },
  DynamicProxyReturn: {
    request: { appUsername: 'shop1', proxyType: 104, productNo: 'P-DYN-1', flowNum: 10, remark: 'r' },
    response: { returnAmount: 0.1 },
  },
};
