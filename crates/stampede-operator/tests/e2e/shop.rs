//! #23 in the cluster: the shop example's flow (per-VU login, generated order ids, a cart of one
//! to three random products, a timed checkout group) over 5 runners against the built-in
//! target's shop. What must hold across the fleet: every VU its own `vu.id` (one user each),
//! no order id twice in the union of the runners' orders, and the merged status equal to the
//! target's own count.

use std::time::Duration;

use stampede_api::Phase;
use stampede_testcluster::wait_for;

use crate::operator::{create, finish, loadtest, phase_is, setup};

/// The example's scenario for a LoadTest: `setup` and `teardown` (refused in a cluster for
/// now) and the coupon they give left out, the load set to `vus` VUs for `iterations`.
fn shop_scenario(base_url: &str, vus: u32, iterations: u64) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/shop.yaml");
    let mut sc: serde_json::Value = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let o = sc.as_object_mut().unwrap();
    o.remove("setup");
    o.remove("teardown");
    o.insert("baseUrl".into(), base_url.into());
    o.insert("load".into(), serde_json::json!({"executor": "constant-vus", "vus": vus, "iterations": iterations}));
    let checkout = &mut sc["scenarios"][0]["steps"][1]["steps"][1]["request"]["json"];
    assert!(checkout.as_object_mut().unwrap().remove("coupon").is_some(), "the example's checkout changed");
    sc
}

#[tokio::test]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_five_runners_of_the_shop_keep_vu_ids_and_order_ids_distinct_across_the_fleet() {
    let env = setup("shop").await;
    let sc = shop_scenario(&env.target.base_url(), 10, 200);
    let api = create(&env, &loadtest("shop", 5, sc, serde_json::json!({}))).await;
    let done = phase_is(&[Phase::Succeeded, Phase::Failed]);
    let lt = wait_for(&api, "shop", Duration::from_secs(180), done).await.unwrap();
    let st = lt.status.clone().unwrap();
    assert_eq!(st.phase, Phase::Succeeded, "{:?}", st.message);
    let shop = env.target.stats().shop().counts();
    assert_eq!((shop.logins, shop.users), (10, 10), "one login per VU, 10 distinct vu.id over 5 runners");
    assert_eq!((shop.orders, shop.duplicate_order_ids, shop.unauthorized), (200, 0, 0), "{shop:?}");
    let summary = st.summary.unwrap();
    assert_eq!((summary.requests, summary.error_rate), (env.target.stats().requests(), 0.0));
    // The checkout group's transactions, merged over the runners into the LoadTest's report.
    let report = crate::reports::merged_report(&env, "shop").await;
    let group = report.groups.iter().find(|g| g.step.as_deref() == Some("checkout")).expect("the checkout group");
    assert_eq!((group.requests, group.errors), (200, 0), "one transaction per iteration");
    assert!(group.latency_ms.max > 0.0);
    finish(env).await;
}
