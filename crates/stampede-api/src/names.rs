//! Names of the objects created for a LoadTest: every one within Kubernetes' limits for any
//! valid LoadTest name (up to 253 characters). A name that would be too long keeps the start of
//! the LoadTest's name and a short hash of the whole of it, so two LoadTests never share one.

/// FNV-1a of `text`: stable across versions and machines (the operator and the runners must
/// agree).
fn fnv(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ b as u32).wrapping_mul(0x0100_0193))
}

/// A label value, and a DNS label (a Job's pods' host names): at most 63 characters.
pub const LABEL_MAX: usize = 63;
/// An object name (a DNS subdomain): at most 253 characters.
pub const OBJECT_MAX: usize = 253;
/// A Job's name: its pods' host names are `<job>-<index>` (a DNS label; index < 1000).
pub const JOB_MAX: usize = LABEL_MAX - 4;

/// `base` + `suffix` within `max` characters: a base too long is cut (at a letter or digit)
/// and followed by 8 hex digits of a hash of the whole base.
pub fn fit(base: &str, suffix: &str, max: usize) -> String {
    if base.len() + suffix.len() <= max {
        return format!("{base}{suffix}");
    }
    let hash = fnv(base);
    let keep = max.saturating_sub(suffix.len() + 9);
    let mut end = keep.min(base.len());
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    let cut = base[..end].trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    format!("{cut}-{hash:08x}{suffix}")
}

/// The value of the `stampede.dev/loadtest` label of a LoadTest's children.
pub fn label_value(lt: &str) -> String {
    fit(lt, "", LABEL_MAX)
}

/// The immutable ConfigMap holding the resolved scenario.
pub fn scenario_config_map(lt: &str) -> String {
    fit(lt, "-scenario", OBJECT_MAX)
}

/// The ConfigMap holding the LoadTest's merged report (key [`super::REPORT_KEY`]); it is
/// kept as long as the LoadTest.
pub fn report_config_map(lt: &str) -> String {
    fit(lt, "-report", OBJECT_MAX)
}

/// The ConfigMap runner `index` writes its report to.
pub fn result_config_map(lt: &str, index: u32) -> String {
    fit(lt, &format!("-result-{index}"), OBJECT_MAX)
}

/// The Indexed Job running the runners.
pub fn job(lt: &str) -> String {
    fit(lt, "-runners", JOB_MAX)
}

/// The ServiceAccount (and Role, RoleBinding) of the runners.
pub fn runner_account(lt: &str) -> String {
    fit(lt, "-runner", OBJECT_MAX)
}

/// The Job running the scenario's `setup` (`which`: `setup`) or `teardown` once.
pub fn once_job(lt: &str, which: &str) -> String {
    fit(lt, &format!("-{which}"), JOB_MAX)
}

/// The ConfigMap the setup and teardown pods write their reports to.
pub fn once_config_map(lt: &str) -> String {
    fit(lt, "-once", OBJECT_MAX)
}

/// The Secret holding the values the `setup` of run `run` ([`super::run_id`]) extracted,
/// which its runners read: one per run and LoadTest object, so that the operator never has
/// to read a Secret to tell whose it is.
pub fn setup_secret(lt: &str, run: &str) -> String {
    fit(lt, &format!("-setup-{:08x}", fnv(run)), OBJECT_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_derived_name_fits_for_any_valid_loadtest_name() {
        let short = "checkout";
        assert_eq!((job(short), result_config_map(short, 2)), ("checkout-runners".into(), "checkout-result-2".into()));
        for len in [50, 51, 52, 53, 54, 63, 64, 200, 253] {
            let name: String =
                (0..len).map(|i| if i % 7 == 6 { '-' } else { (b'a' + (i % 26) as u8) as char }).collect();
            let name = name.trim_end_matches('-').to_string() + "z";
            let name = &name[name.len().saturating_sub(len)..];
            let job = job(name);
            assert!(job.len() <= JOB_MAX && format!("{job}-999").len() <= LABEL_MAX, "{len}: {job}");
            assert!(label_value(name).len() <= LABEL_MAX, "{len}");
            for n in [
                scenario_config_map(name),
                report_config_map(name),
                result_config_map(name, 999),
                runner_account(name),
                once_config_map(name),
                setup_secret(name, "0b0b0b0b-1111-2222-3333-444444444444/999"),
            ] {
                assert!(n.len() <= OBJECT_MAX, "{len}: {n}");
            }
            let teardown = once_job(name, "teardown");
            assert!(teardown.len() <= JOB_MAX, "{len}: {teardown}");
            for n in [job.clone(), teardown, label_value(name), result_config_map(name, 999)] {
                assert!(
                    n.chars().next().unwrap().is_ascii_alphanumeric()
                        && n.chars().last().unwrap().is_ascii_alphanumeric(),
                    "{n}"
                );
                assert!(!n.contains("--"), "{n}");
            }
        }
        // Two long names with the same start stay apart.
        let a = format!("{}-a", "x".repeat(70));
        let b = format!("{}-b", "x".repeat(70));
        assert_ne!(job(&a), job(&b));
        assert_ne!(label_value(&a), label_value(&b));
    }
}
