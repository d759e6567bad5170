//! The scenario file's types read as users write them.

use super::*;

#[test]
fn an_arrival_rate_with_fewer_vus_than_runners_cannot_be_split() {
    let spec = LoadSpec {
        executor: Executor::ConstantArrivalRate,
        rate: Some(10),
        max_vus: Some(2),
        pre_allocated_vus: Some(2),
        ..LoadSpec::default()
    };
    assert_eq!(spec.share_problem(2), None);
    let (field, why) = spec.share_problem(3).expect("runner 2 gets 3/s and no VU");
    assert_eq!(field, "maxVUs");
    assert!(why.contains("runner 2") && why.contains("at least 3"), "{why}");
    // Its share of the rate is 0 too: nothing is lost.
    assert_eq!(LoadSpec { rate: Some(2), ..spec.clone() }.share_problem(3), None);
    // VU-based executors: a runner without VUs has nothing to run, the others run every VU.
    let vus = LoadSpec { executor: Executor::ConstantVus, vus: Some(2), ..LoadSpec::default() };
    assert_eq!(vus.share_problem(3), None);
}

#[test]
fn splits_add_up_exactly_for_awkward_counts() {
    for total in [0u64, 1, 7, 100, 1000, 1001, 99_999] {
        for count in [1u32, 2, 3, 7, 13, 64] {
            let parts: Vec<u64> = (0..count).map(|i| split_evenly(total, count, i)).collect();
            assert_eq!(parts.iter().sum::<u64>(), total, "{total}/{count}");
            let (min, max) = (parts.iter().min().unwrap(), parts.iter().max().unwrap());
            assert!(max - min <= 1, "{total}/{count}: {parts:?}");
        }
    }
}

#[test]
fn shares_split_vus_iterations_and_stage_targets() {
    let spec = LoadSpec {
        executor: Executor::RampingVus,
        vus: None,
        duration: None,
        iterations: None,
        start_vus: Some(5),
        stages: vec![
            Stage { duration: Some(Dur::from_secs(10)), target: 1000 },
            Stage { duration: Some(Dur::from_secs(5)), target: 7 },
        ],
        graceful_ramp_down: None,
        graceful_stop: Some(Dur::from_secs(3)),
        ..LoadSpec::default()
    };
    let shares: Vec<LoadSpec> = (0..7).map(|i| spec.share(i, 7)).collect();
    assert_eq!(shares.iter().map(|s| s.start_vus.unwrap()).sum::<u32>(), 5);
    assert_eq!(shares.iter().map(|s| s.stages[0].target).sum::<u32>(), 1000);
    assert_eq!(shares.iter().map(|s| s.stages[1].target).sum::<u32>(), 7);
    assert!(
        shares
            .iter()
            .all(|s| s.stages[0].duration == Some(Dur::from_secs(10)) && s.graceful_stop == spec.graceful_stop)
    );
    assert!(shares.iter().all(LoadSpec::has_work));

    let fixed = LoadSpec {
        executor: Executor::ConstantVus,
        vus: Some(2),
        iterations: Some(11),
        stages: vec![],
        start_vus: None,
        ..spec
    };
    let shares: Vec<LoadSpec> = (0..3).map(|i| fixed.share(i, 3)).collect();
    assert_eq!(shares.iter().map(|s| s.vus.unwrap()).collect::<Vec<_>>(), vec![1, 1, 0]);
    // Only runners with VUs get iterations: none is stranded on a runner without VUs.
    assert_eq!(shares.iter().map(|s| s.iterations.unwrap()).collect::<Vec<_>>(), vec![6, 5, 0]);
    assert!(!shares[2].has_work(), "a runner with 0 VUs has nothing to do");
}

/// Every iteration lands on a runner that has a VU to run it, whatever the counts.
#[test]
fn iteration_shares_add_up_over_the_runners_that_run() {
    for vus in [1u32, 2, 3, 5, 8, 100] {
        for iterations in [1u64, 2, 7, 10, 1001] {
            for count in [1u32, 2, 3, 7, 13] {
                let spec = LoadSpec {
                    executor: Executor::ConstantVus,
                    vus: Some(vus),
                    duration: None,
                    iterations: Some(iterations),
                    start_vus: None,
                    stages: vec![],
                    graceful_ramp_down: None,
                    graceful_stop: None,
                    ..LoadSpec::default()
                };
                let shares: Vec<LoadSpec> = (0..count).map(|i| spec.share(i, count)).collect();
                let run: u64 = shares.iter().filter(|s| s.has_work()).map(|s| s.iterations.unwrap()).sum();
                assert_eq!(run, iterations, "vus {vus}, iterations {iterations}, runners {count}");
                assert_eq!(shares.iter().map(|s| s.vus.unwrap()).sum::<u32>(), vus);
            }
        }
    }
}
