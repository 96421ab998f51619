// The sandbox's dictionaries and product catalogue. Codes follow the seed's shapes: continent 2 letters,
// country ISO alpha-3, state = country + 3 digits (…000 = no state level), city = state + 3 digits.
// Product numbers are exported (SIM_PRODUCTS) so configs and tests can name them.

export const SIM_PRODUCTS = {
  /** 101 socks5, exclusive, USA, 1 calendar month, segments, changeProxy and assignIp supported */
  staticUsSocks: 'STC-101-USA-SOCKS',
  /** 102 http, shared (projectId required: tiktok has stock, amazon none), CHN, 7 days */
  staticCnShared: 'STC-102-CHN-SHARED',
  /** 103 socks5+http, exclusive, DEU, 1 calendar year, changeProxy */
  staticDeYear: 'STC-103-DEU-YEAR',
  /** 101 socks5, SGP (no state level), 1 day, oneDay */
  staticSgDay: 'STC-101-SGP-DAY',
  /** 103, enable = 2: listed but not purchasable */
  staticOffline: 'STC-103-JPN-OFF',
  /** 101, inventory 0: listed but not purchasable */
  staticSoldOut: 'STC-101-GBR-EMPTY',
  /** 104 by traffic (MB), flowConversionBase 1024, every dynamic feature */
  dynamicTraffic: 'DYN-104-FLOW',
  /** 105 by traffic (MB), flowConversionBase 1000, no change-every-time */
  dynamicTrafficCn: 'DYN-105-FLOW',
  /** 104 by IP count (packages of 10 IPs, 30 minutes each) */
  dynamicIpCount: 'DYN-104-IP',
  /** 104 by traffic, pwdDrawProxyUser -1: only the main account may draw by password; no whitelist, no mixed API draw */
  dynamicMainOnly: 'DYN-104-MAIN',
  /** 104 by IP count in packages of 5 IPs, 10 minutes each; sessions 1-60 minutes */
  dynamicIpFive: 'DYN-104-IP5',
  /** exists on the platform but not authorized for the merchant: never listed, GetProductInfo → 10004 */
  unauthorized: 'STC-101-UNAUTH',
} as const;

export interface AreaNode {
  code: string;
  name: string;
  cname: string;
  children?: AreaNode[];
}

const city = (code: string, name: string, cname: string): AreaNode => ({ code, name, cname });

export const AREAS: AreaNode[] = [
  {
    code: 'AS',
    name: 'Asia',
    cname: '亚洲',
    children: [
      {
        code: 'CHN',
        name: 'China',
        cname: '中国',
        children: [
          { code: 'CHN001', name: 'Beijing', cname: '北京', children: [city('CHN001001', 'Beijing', '北京')] },
          {
            code: 'CHN011',
            name: 'Guangdong',
            cname: '广东',
            children: [city('CHN011001', 'Guangzhou', '广州'), city('CHN011002', 'Shenzhen', '深圳')],
          },
        ],
      },
      {
        code: 'JPN',
        name: 'Japan',
        cname: '日本',
        children: [{ code: 'JPN013', name: 'Tokyo', cname: '东京都', children: [city('JPN013001', 'Tokyo', '东京')] }],
      },
      { code: 'SGP', name: 'Singapore', cname: '新加坡' },
    ],
  },
  {
    code: 'NA',
    name: 'North America',
    cname: '北美洲',
    children: [
      {
        code: 'USA',
        name: 'United States',
        cname: '美国',
        children: [
          {
            code: 'USA005',
            name: 'California',
            cname: '加利福尼亚',
            children: [city('USA005001', 'Los Angeles', '洛杉矶'), city('USA005002', 'San Francisco', '旧金山')],
          },
          { code: 'USA036', name: 'New York', cname: '纽约州', children: [city('USA036001', 'New York City', '纽约')] },
        ],
      },
    ],
  },
  {
    code: 'EU',
    name: 'Europe',
    cname: '欧洲',
    children: [
      {
        code: 'DEU',
        name: 'Germany',
        cname: '德国',
        children: [{ code: 'DEU009', name: 'Bavaria', cname: '巴伐利亚', children: [city('DEU009001', 'Munich', '慕尼黑')] }],
      },
      {
        code: 'GBR',
        name: 'United Kingdom',
        cname: '英国',
        children: [{ code: 'GBR001', name: 'England', cname: '英格兰', children: [city('GBR001001', 'London', '伦敦')] }],
      },
    ],
  },
];

export interface CityRecord {
  cityCode: string;
  cityName: string;
  cityEnName: string;
  stateCode: string;
  stateName: string;
  stateEnName: string;
  countryCode: string;
  countryName: string;
  countryEnName: string;
  areaCode: string;
  areaName: string;
  areaEnName: string;
  status: number;
}

/** Cities flattened from the tree (a country without states, like SGP, is one city: SGP000000). */
export function citiesOf(areas: AreaNode[]): CityRecord[] {
  const out: CityRecord[] = [];
  for (const area of areas) {
    for (const country of area.children ?? []) {
      const states = country.children?.length
        ? country.children
        : [{ code: `${country.code}000`, name: '', cname: '', children: [city(`${country.code}000000`, country.name, country.cname)] }];
      for (const state of states) {
        for (const c of state.children ?? []) {
          out.push({
            cityCode: c.code,
            cityName: c.cname,
            cityEnName: c.name,
            stateCode: state.code,
            stateName: state.cname,
            stateEnName: state.name,
            countryCode: country.code,
            countryName: country.cname,
            countryEnName: country.name,
            areaCode: area.code,
            areaName: area.cname,
            areaEnName: area.name,
            status: 1,
          });
        }
      }
    }
  }
  return out;
}

export const PROJECTS = [
  { code: 'tiktok', name: 'TikTok', status: 1 },
  { code: 'amazon', name: 'Amazon', status: 1 },
  { code: 'shopee', name: 'Shopee', status: -1 },
];

export interface CidrBlock {
  cidr: string;
  count: number;
  asn: string;
  isp: string;
  projectList: { code: string; inventory: number }[];
}

/** A product record in the seed's shape (2.6); `authorized` is the sandbox's own flag and never sent. */
export interface SimProduct {
  productNo: string;
  productName: string;
  proxyType: number;
  useType: string;
  protocol: string;
  useLimit: number;
  sellLimit: number;
  areaCode: string;
  countryCode: string;
  stateCode: string;
  cityCode: string;
  detail: string;
  costPrice: string;
  inventory: number;
  ipType: number;
  ispType: number;
  netType: number;
  duration: number;
  unit: number;
  bandWidth: number;
  bandWidthPrice: string;
  maxBandWidth: number;
  flow: number;
  cpu: number;
  memory: number;
  enable: number;
  supplierCode: string;
  ipCount: number;
  ipDuration: number;
  assignIp: number;
  parentNo: string;
  cidrStatus: number;
  oneDay: number;
  cidrBlocks: CidrBlock[];
  offlineCidrBlocks: { cidr: string; offlineTime: string }[];
  proxyEverytimeChange: number;
  proxyGlobalRandom: number;
  apiDrawGlobalRandom: number;
  ipWhiteList: number;
  pwdDrawProxyUser: number;
  proxyUserFlowLimit: number;
  flowUseLog: number;
  pwdDrawSessionRange: string;
  flowConversionBase: number;
  changeProxy: number;
  projectList: { code: string; inventory: number }[];
  productType: number;
  authorized: boolean;
}

const base: Omit<
  SimProduct,
  | 'productNo'
  | 'productName'
  | 'proxyType'
  | 'countryCode'
  | 'stateCode'
  | 'cityCode'
  | 'areaCode'
  | 'costPrice'
  | 'inventory'
  | 'duration'
  | 'unit'
> = {
  useType: '1',
  protocol: '1',
  useLimit: 3,
  sellLimit: 3,
  detail: '',
  ipType: 1,
  ispType: 0,
  netType: 0,
  bandWidth: 0,
  bandWidthPrice: '0.00',
  maxBandWidth: 0,
  flow: 0,
  cpu: 0,
  memory: 0,
  enable: 1,
  supplierCode: 'SUP1',
  ipCount: 0,
  ipDuration: 0,
  assignIp: -1,
  parentNo: '',
  cidrStatus: -1,
  oneDay: -1,
  cidrBlocks: [],
  offlineCidrBlocks: [],
  proxyEverytimeChange: -1,
  proxyGlobalRandom: -1,
  apiDrawGlobalRandom: -1,
  ipWhiteList: -1,
  pwdDrawProxyUser: -1,
  proxyUserFlowLimit: -1,
  flowUseLog: -1,
  pwdDrawSessionRange: '',
  flowConversionBase: 0,
  changeProxy: -1,
  projectList: [],
  productType: 1,
  authorized: true,
};

const dynamicBase = {
  ...base,
  useType: '1,2',
  protocol: '1,2',
  areaCode: '',
  stateCode: '',
  cityCode: '',
  duration: 0,
  unit: 10,
  inventory: 999_999,
  pwdDrawProxyUser: 1,
  ipWhiteList: 1,
  proxyGlobalRandom: 1,
  apiDrawGlobalRandom: 1,
};

/** A fresh catalogue (state owns and mutates its copy). */
export function createCatalog(): SimProduct[] {
  return [...staticProducts(), ...dynamicProducts(), unauthorizedProduct()];
}

/** Static products: by IP and period, in stock, shared, sold out and offline. */
function staticProducts(): SimProduct[] {
  return [
    usStaticSocks(),
    {
      ...base,
      productNo: SIM_PRODUCTS.staticCnShared,
      productName: 'CN shared http',
      proxyType: 102,
      protocol: '2',
      areaCode: 'AS',
      countryCode: 'CHN',
      stateCode: 'CHN011',
      cityCode: 'CHN011002',
      costPrice: '3.00',
      inventory: 100,
      duration: 7,
      unit: 1,
      productType: 2,
      useLimit: 2,
      sellLimit: 1,
      projectList: [
        { code: 'tiktok', inventory: 50 },
        { code: 'amazon', inventory: 0 },
      ],
      cidrBlocks: [
        { cidr: '100.64.10.0/24', count: 100, asn: 'AS64510', isp: 'Sandbox Mobile', projectList: [{ code: 'tiktok', inventory: 50 }] },
      ],
      cidrStatus: 1,
    },
    {
      ...base,
      productNo: SIM_PRODUCTS.staticDeYear,
      productName: 'DE residential yearly',
      proxyType: 103,
      protocol: '1,2',
      areaCode: 'EU',
      countryCode: 'DEU',
      stateCode: 'DEU009',
      cityCode: 'DEU009001',
      costPrice: '40.00',
      inventory: 20,
      duration: 1,
      unit: 4,
      changeProxy: 1,
      netType: 1,
      ispType: 3,
    },
    {
      ...base,
      productNo: SIM_PRODUCTS.staticSgDay,
      productName: 'SG daily',
      proxyType: 101,
      protocol: '1',
      areaCode: 'AS',
      countryCode: 'SGP',
      stateCode: 'SGP000',
      cityCode: '',
      costPrice: '0.30',
      inventory: 50,
      duration: 1,
      unit: 1,
      oneDay: 1,
    },
    {
      ...base,
      productNo: SIM_PRODUCTS.staticOffline,
      productName: 'JP residential (offline)',
      proxyType: 103,
      protocol: '2',
      areaCode: 'AS',
      countryCode: 'JPN',
      stateCode: 'JPN013',
      cityCode: 'JPN013001',
      costPrice: '9.00',
      inventory: 10,
      duration: 1,
      unit: 3,
      enable: 2,
    },
    {
      ...base,
      productNo: SIM_PRODUCTS.staticSoldOut,
      productName: 'UK static (sold out)',
      proxyType: 101,
      protocol: '1',
      areaCode: 'EU',
      countryCode: 'GBR',
      stateCode: 'GBR001',
      cityCode: 'GBR001001',
      costPrice: '6.00',
      inventory: 0,
      duration: 1,
      unit: 3,
    },
  ];
}

/** The richest static product: CIDR blocks with ISPs, offline blocks, bandwidth options and IP changes. */
function usStaticSocks(): SimProduct {
  return {
    ...base,
    productNo: SIM_PRODUCTS.staticUsSocks,
    productName: 'US static socks5',
    proxyType: 101,
    protocol: '1',
    areaCode: 'NA',
    countryCode: 'USA',
    stateCode: 'USA005',
    cityCode: 'USA005001',
    costPrice: '5.00',
    inventory: 500,
    duration: 1,
    unit: 3,
    bandWidth: 5,
    bandWidthPrice: '0.50',
    maxBandWidth: 100,
    assignIp: 1,
    cidrStatus: 1,
    changeProxy: 1,
    cidrBlocks: [
      { cidr: '198.51.100.0/24', count: 200, asn: 'AS64500', isp: 'Sandbox Telecom', projectList: [] },
      { cidr: '203.0.113.0/25', count: 100, asn: 'AS64501', isp: 'Example Cable', projectList: [] },
    ],
    offlineCidrBlocks: [{ cidr: '192.0.2.0/26', offlineTime: '2026-01-01 00:00:00' }],
    ispType: 1,
    netType: 1,
  };
}

/** Dynamic products: by traffic (two MB sizes, one drawn by the main account only) and by IP count. */
function dynamicProducts(): SimProduct[] {
  return [
    {
      ...dynamicBase,
      productNo: SIM_PRODUCTS.dynamicTraffic,
      productName: 'Global dynamic traffic',
      proxyType: 104,
      countryCode: '',
      costPrice: '0.004',
      flow: 100,
      flowConversionBase: 1024,
      proxyUserFlowLimit: 1,
      flowUseLog: 1,
      proxyEverytimeChange: 1,
      pwdDrawSessionRange: '1-120',
    },
    {
      ...dynamicBase,
      productNo: SIM_PRODUCTS.dynamicTrafficCn,
      productName: 'CN dynamic traffic',
      proxyType: 105,
      countryCode: '',
      costPrice: '0.003',
      flow: 100,
      flowConversionBase: 1000,
      proxyUserFlowLimit: 1,
      flowUseLog: 1,
      pwdDrawSessionRange: '1-90',
      useLimit: 2,
      sellLimit: 1,
    },
    {
      ...dynamicBase,
      productNo: SIM_PRODUCTS.dynamicIpCount,
      productName: 'Global dynamic by IP',
      proxyType: 104,
      countryCode: '',
      costPrice: '2.00',
      ipCount: 10,
      ipDuration: 30,
      duration: 30,
      unit: 1,
    },
    {
      ...dynamicBase,
      productNo: SIM_PRODUCTS.dynamicMainOnly,
      productName: 'Global dynamic traffic (main account draws)',
      proxyType: 104,
      countryCode: '',
      costPrice: '0.004',
      flow: 100,
      flowConversionBase: 1024,
      pwdDrawProxyUser: -1,
      ipWhiteList: -1,
      apiDrawGlobalRandom: -1,
      pwdDrawSessionRange: '1-30',
    },
    {
      ...dynamicBase,
      productNo: SIM_PRODUCTS.dynamicIpFive,
      productName: 'Global dynamic by IP (5-IP packages)',
      proxyType: 104,
      countryCode: '',
      costPrice: '1.00',
      ipCount: 5,
      ipDuration: 10,
      duration: 10,
      unit: 1,
      pwdDrawSessionRange: '1-60',
    },
  ];
}

/** A product the merchant is not authorized to sell. */
function unauthorizedProduct(): SimProduct {
  return {
    ...base,
    productNo: SIM_PRODUCTS.unauthorized,
    productName: 'not authorized',
    proxyType: 101,
    protocol: '1',
    areaCode: 'NA',
    countryCode: 'USA',
    stateCode: 'USA036',
    cityCode: 'USA036001',
    costPrice: '1.00',
    inventory: 100,
    duration: 1,
    unit: 3,
    authorized: false,
  };
}

export interface ProductArea {
  productNo: string;
  proxyType: number;
  areaCode: string;
  countryCode: string;
  stateCode: string;
  cityCode: string;
  status: number;
  region: string;
  supplierCode: string;
}

const pa = (
  productNo: string,
  proxyType: number,
  areaCode: string,
  countryCode: string,
  stateCode: string,
  cityCode: string,
  region: string,
  status = 1,
): ProductArea => ({ productNo, proxyType, areaCode, countryCode, stateCode, cityCode, status, region, supplierCode: 'SUP1' });

/** Regions a dynamic product can draw from (ProductAreaList); the last 104 entry is off sale. */
export function productAreas(productNo: string): ProductArea[] {
  if (productNo === SIM_PRODUCTS.dynamicTrafficCn) {
    return [
      pa(productNo, 105, 'AS', 'CHN', 'CHN000', '', 'cn'),
      pa(productNo, 105, 'AS', 'CHN', 'CHN011', 'CHN011000', 'cn-gd'),
      pa(productNo, 105, 'AS', 'CHN', 'CHN011', 'CHN011002', 'cn-gd-sz'),
      pa(productNo, 105, 'AS', 'CHN', 'CHN001', 'CHN001001', 'cn-bj'),
    ];
  }
  if (
    productNo === SIM_PRODUCTS.dynamicTraffic ||
    productNo === SIM_PRODUCTS.dynamicIpCount ||
    productNo === SIM_PRODUCTS.dynamicMainOnly ||
    productNo === SIM_PRODUCTS.dynamicIpFive
  ) {
    return [
      pa(productNo, 104, 'NA', 'USA', 'USA000', '', 'us'),
      pa(productNo, 104, 'NA', 'USA', 'USA005', 'USA005000', 'us-ca'),
      pa(productNo, 104, 'NA', 'USA', 'USA005', 'USA005001', 'us-ca-la'),
      pa(productNo, 104, 'AS', 'JPN', 'JPN013', 'JPN013001', 'jp-tyo'),
      pa(productNo, 104, 'EU', 'DEU', 'DEU000', '', 'de'),
      pa(productNo, 104, 'EU', 'GBR', 'GBR001', 'GBR001001', 'gb-lon', -1),
    ];
  }
  return [];
}

/** Codes a draw may name for a product: every level of every on-sale area entry. */
export function drawableCodes(productNo: string): Set<string> {
  const codes = new Set<string>();
  for (const a of productAreas(productNo)) {
    if (a.status !== 1) continue;
    for (const c of [a.areaCode, a.countryCode, a.stateCode, a.cityCode]) if (c && !c.endsWith('000')) codes.add(c);
  }
  return codes;
}
