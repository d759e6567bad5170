//! Seeded fuzzing on stable Rust, shared by every fuzz test of the workspace (the scenario
//! parser here, the expression language and the HTTP/1.1 codec in the engine's unit tests, the
//! importers in the CLI's): each includes this one file with `#[path]`.
//!
//! A run is `STAMPEDE_FUZZ_CASES` cases (default [`DEFAULT_CASES`]) from `STAMPEDE_FUZZ_SEED`
//! (default [`DEFAULT_SEED`], so `make test` tries the same inputs every time), stopping early
//! after `STAMPEDE_FUZZ_SECS` seconds when that is set. Case `n` draws from a generator seeded
//! by the run's seed and `n` alone, so any case can be drawn again. A case that panics fails
//! the test with the seed, the case and the input, which is also saved under the system's
//! temporary folder; `STAMPEDE_FUZZ_REPLAY=FILE` runs the test on that one input. A case still
//! running after `STAMPEDE_FUZZ_CASE_SECS` seconds (default 120) is a hang: its input is saved
//! and the process aborts. A crash that kills the process (a stack overflow) leaves the input
//! it was running in `stampede-fuzz-NAME.last` there.
//!
//! The random numbers are SplitMix64's, here rather than `fastrand`'s because the CLI crate
//! does not depend on `fastrand` and a new dependency would change `Cargo.lock`.

#![allow(dead_code, reason = "each fuzz test uses the part it needs")]

use std::io::Write as _;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Cases a test tries by default: a few seconds each in a debug build.
pub(crate) const DEFAULT_CASES: u64 = 300;

/// The seed by default: the same inputs at every `make test`.
pub(crate) const DEFAULT_SEED: u64 = 0x5eed_2024;

/// A small, seeded, deterministic generator (SplitMix64).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.u64() % n as u64) as usize }
    }

    /// A number in `lo..=hi`.
    pub(crate) fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True once in `n` times.
    pub(crate) fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// One of `words` (as [`Rng::pick`], for text).
    pub(crate) fn word<'a>(&mut self, words: &[&'a str]) -> &'a str {
        words[self.below(words.len())]
    }

    /// A size that is mostly small, sometimes large: `1 << (0..=bits)` scaled at random.
    pub(crate) fn size(&mut self, bits: u32) -> usize {
        let cap = 1usize << self.below(bits as usize + 1);
        self.between(1, cap)
    }
}

/// Tokens that break parsers: template and expression delimiters, quotes and escapes,
/// numbers at and past the integer limits, control bytes, a byte-order mark, line ends,
/// YAML, JSON and XML syntax, multi-byte characters.
pub(crate) const TOKENS: &[&str] = &[
    "{{",
    "}}",
    "${",
    "}",
    "{",
    "'",
    "\"",
    "\\",
    "\\u",
    "\\x",
    "[[[[",
    "]]]]",
    "((((",
    "))))",
    "99999999999999999999",
    "-9223372036854775808",
    "9223372036854775807",
    "18446744073709551616",
    "1e309",
    "-0",
    "0x",
    "NaN",
    ".inf",
    "\0",
    "\u{feff}",
    "\r\n",
    "\r",
    "\n",
    "\t",
    " ",
    ": ",
    "- ",
    "#",
    "&a ",
    "*a",
    "!!binary ",
    "!!str ",
    "---\n",
    "...\n",
    "? ",
    "|",
    ">-",
    "%YAML 1.2\n",
    ",",
    "null",
    "~",
    "true",
    "<",
    ">",
    "</",
    "/>",
    "<![CDATA[",
    "]]>",
    "&amp;",
    "&#",
    "&#x0;",
    "<!--",
    "-->",
    "=",
    "é",
    "€",
    "😀",
    "\u{202e}",
    "\u{7f}",
    "\u{1b}[",
    "%",
    "%00",
    "%zz",
    "?",
    "&",
    "@",
    "://",
    "{{ baseUrl }}",
    "{{ env.X }}",
    "{{ vu.id }}",
    "{{ uuid() }}",
    "{{ randomInt(1, 99999999999999999999) }}",
];

/// Applies one to eight mutations to `input`: flipped bits, bytes changed, a token (one of
/// [`TOKENS`] or `extra`) put in, deep nesting put in, a range deleted or repeated, a piece of
/// another input (`corpus`) spliced in, a cut. The result has at most `max_len` bytes.
pub(crate) fn mutate(rng: &mut Rng, input: &[u8], corpus: &[Vec<u8>], extra: &[&str], max_len: usize) -> Vec<u8> {
    let mut out = input.to_vec();
    let rounds = 1 + rng.below(8);
    for _ in 0..rounds {
        let at = rng.below(out.len() + 1);
        match rng.below(11) {
            0 => {
                if let Some(b) = out.get_mut(at) {
                    *b ^= 1 << rng.below(8);
                }
            }
            1 => {
                if let Some(b) = out.get_mut(at) {
                    *b = rng.u64() as u8;
                }
            }
            2 | 3 => {
                let token = if !extra.is_empty() && rng.one_in(2) { *rng.pick(extra) } else { *rng.pick(TOKENS) };
                out.splice(at..at, token.bytes());
            }
            4 => {
                let (open, close) =
                    *rng.pick(&[("[", "]"), ("{", "}"), ("(", ")"), ("- ", ""), ("a:\n ", ""), ("<a>", "</a>")]);
                let depth = rng.size(13);
                let mut nest = open.repeat(depth);
                if rng.one_in(2) {
                    nest.push_str(&close.repeat(depth));
                }
                out.splice(at..at, nest.into_bytes());
            }
            5 => {
                let end = (at + rng.size(10)).min(out.len());
                out.drain(at..end);
            }
            6 => {
                let end = (at + rng.size(12)).min(out.len());
                let chunk = out[at..end].to_vec();
                let times = rng.between(1, 4);
                for _ in 0..times {
                    let to = rng.below(out.len() + 1);
                    out.splice(to..to, chunk.iter().copied());
                }
            }
            7 => {
                if !corpus.is_empty() {
                    let other = rng.pick(corpus);
                    let from = rng.below(other.len() + 1);
                    let end = (from + rng.size(12)).min(other.len());
                    let replaced = (at + rng.size(8)).min(out.len());
                    out.splice(at..replaced, other[from..end].iter().copied());
                }
            }
            8 => out.truncate(at),
            9 => {
                // A digit run made huge, or a number put where one was.
                if let Some(d) = out[at.min(out.len())..].iter().position(u8::is_ascii_digit) {
                    let huge = *rng.pick(&["99999999999999999999", "-9223372036854775808", "0", "-1", "4294967296"]);
                    out.splice(at + d..at + d + 1, huge.bytes());
                }
            }
            _ => {
                // A line end turned into its other form.
                if let Some(n) = out[at.min(out.len())..].iter().position(|&b| b == b'\n') {
                    let end = *rng.pick(&["\r\n", "\r", "", "\n\n"]);
                    out.splice(at + n..at + n + 1, end.bytes());
                }
            }
        }
        if out.len() > max_len {
            out.truncate(max_len);
        }
    }
    out
}

/// [`mutate`], as text (bytes that are no longer UTF-8 become U+FFFD).
pub(crate) fn mutate_text(rng: &mut Rng, input: &str, corpus: &[Vec<u8>], extra: &[&str], max_len: usize) -> String {
    String::from_utf8_lossy(&mutate(rng, input.as_bytes(), corpus, extra, max_len)).into_owned()
}

/// A run's settings, from the environment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) cases: u64,
    pub(crate) seed: u64,
    pub(crate) secs: Option<u64>,
    pub(crate) case_secs: u64,
}

fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|e| panic!("{name}={text}: {e}")))
}

pub(crate) fn settings() -> Settings {
    Settings {
        cases: env_number("STAMPEDE_FUZZ_CASES").unwrap_or(DEFAULT_CASES),
        seed: env_number("STAMPEDE_FUZZ_SEED").unwrap_or(DEFAULT_SEED),
        secs: env_number("STAMPEDE_FUZZ_SECS"),
        case_secs: env_number("STAMPEDE_FUZZ_CASE_SECS").unwrap_or(120),
    }
}

/// Case `case`'s generator: from the run's seed and the case's number only.
pub(crate) fn case_rng(seed: u64, case: u64) -> Rng {
    let mut mix = Rng::new(seed ^ case.wrapping_mul(0xd1b5_4a32_d192_ed03));
    Rng::new(mix.u64())
}

/// The input shown in a failure: printable ASCII as is, other bytes escaped, at most 4 KiB.
pub(crate) fn shown(input: &[u8]) -> String {
    let cut = input.len().min(4096);
    let mut text: String = input[..cut].escape_ascii().to_string();
    if cut < input.len() {
        text.push_str(&format!("… ({} more bytes)", input.len() - cut));
    }
    text
}

fn saved_as(name: &str, what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("stampede-fuzz-{name}.{what}"))
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Runs the fuzz test `name` (a file-name-safe word): for each case, `generate` draws an input
/// from the case's generator and `check` runs it (it panics when the property fails; an error
/// the code returns is no failure). Returns the number of cases run.
pub(crate) fn run(name: &str, mut generate: impl FnMut(&mut Rng) -> Vec<u8>, mut check: impl FnMut(&[u8])) -> u64 {
    if let Ok(file) = std::env::var("STAMPEDE_FUZZ_REPLAY") {
        let input = std::fs::read(&file).unwrap_or_else(|e| panic!("STAMPEDE_FUZZ_REPLAY={file}: {e}"));
        check(&input);
        return 1;
    }
    let s = settings();
    let last = saved_as(name, "last");
    // The hang guard: a case running too long saves its input and aborts the process.
    let started = Arc::new(AtomicU64::new(0)); // milliseconds since `epoch` the case began, +1
    let current = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let epoch = Instant::now();
    let guard = {
        let (started, current, done, name, last) =
            (started.clone(), current.clone(), done.clone(), name.to_string(), last.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let began = started.load(Ordering::Relaxed);
                let now = epoch.elapsed().as_millis() as u64 + 1;
                if began > 0 && now.saturating_sub(began) > s.case_secs * 1000 && !done.load(Ordering::Relaxed) {
                    let case = current.load(Ordering::Relaxed);
                    let keep = saved_as(&name, &format!("{:#x}-{case}.input", s.seed));
                    let _ = std::fs::copy(&last, &keep);
                    // Straight to the standard error: the test harness's capture is lost on abort.
                    let _ = writeln!(
                        std::io::stderr(),
                        "fuzz {name}: case {case} of seed {:#x} still runs after {} s (a hang); its input is in {}",
                        s.seed,
                        s.case_secs,
                        keep.display()
                    );
                    std::process::abort();
                }
            }
        })
    };
    let mut run = 0;
    for case in 0..s.cases {
        if s.secs.is_some_and(|secs| epoch.elapsed() >= Duration::from_secs(secs)) {
            break;
        }
        let mut rng = case_rng(s.seed, case);
        let input = generate(&mut rng);
        std::fs::write(&last, &input).unwrap_or_else(|e| panic!("{}: {e}", last.display()));
        current.store(case, Ordering::Relaxed);
        started.store(epoch.elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| check(&input)));
        started.store(0, Ordering::Relaxed);
        if let Err(payload) = outcome {
            done.store(true, Ordering::Relaxed);
            let keep = saved_as(name, &format!("{:#x}-{case}.input", s.seed));
            let _ = std::fs::write(&keep, &input);
            panic!(
                "fuzz {name}: case {case} of seed {seed:#x} failed: {why}\n\
                 its input ({len} bytes) is in {path}; replay it with STAMPEDE_FUZZ_REPLAY={path}, \
                 or draw it again with STAMPEDE_FUZZ_SEED={seed:#x} STAMPEDE_FUZZ_CASES={next}\n\
                 input: {shown}",
                why = panic_text(&*payload),
                seed = s.seed,
                len = input.len(),
                path = keep.display(),
                next = case + 1,
                shown = shown(&input),
            );
        }
        run += 1;
    }
    done.store(true, Ordering::Relaxed);
    let _ = guard.join();
    let _ = std::fs::remove_file(&last);
    println!("fuzz {name}: {run} cases from seed {:#x}", s.seed);
    run
}
