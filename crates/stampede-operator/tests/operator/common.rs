//! Fixtures shared by the operator's test targets.

/// The scenario of the LoadTests the pure-core and mock-API tests use.
pub(crate) const SCENARIO: &str = r#"
name: shop
baseUrl: http://my-service.default.svc
load: {executor: constant-vus, vus: 10, duration: 30s}
scenarios:
  - name: buy
    steps:
      - {name: home, request: {url: "{{baseUrl}}/"}}
thresholds: ["latency.p99 < 100ms", "errors.rate < 1%"]
"#;
