//! #34: `kubectl explain` on the real control plane explains the LoadTest's fields, the
//! scenario's and the schedule's, from the CRDs' descriptions (the API server publishes them
//! as the resource's OpenAPI).

use stampede_testcluster::TestCluster;

use crate::operator::install_crds;

#[tokio::test]
#[ignore = "needs the local control plane: make e2e"]
async fn e2e_kubectl_explain_describes_the_loadtest_and_its_scenario() {
    let cluster = TestCluster::shared();
    let client = cluster.client().await.unwrap();
    install_crds(&client).await;
    let cases = [
        ("loadtest.spec.scenario", "the same schema as a Stampede scenario file"),
        ("loadtest.spec.runners", "Number of runner pods"),
        ("loadtest.spec.scenario.load.executor", "The workload model"),
        ("loadtest.spec.scenario.thresholds", "Pass/fail rules"),
        ("loadtest.status.summary.latencyMs.p99", "99th percentile, ms"),
        ("loadtest.status.runners.ready", "wait for the start instant"),
        ("loadtestschedule.spec.template.metadata.labels", "Labels of each LoadTest created"),
    ];
    for (field, said) in cases {
        // The API server publishes a new CRD's OpenAPI a moment after it is established.
        let mut last = String::new();
        for _ in 0..60 {
            let out = cluster.kubectl_run(&["explain", field], None);
            last = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            if out.status.success() && last.contains(said) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        assert!(last.contains("DESCRIPTION") && last.contains(said), "kubectl explain {field}:\n{last}");
    }
}
