//! Loading scales linearly with the rig: a 100 000-bone chain through `sinew_problem_from_json`.
//!
//! A benchmark-style check, not a timed test: it asserts that the load succeeds and prints how
//! long it took (run with `--nocapture`). Finding each parent by a scan over the bones made this
//! load quadratic: 9.7 s in a release build on the 2-core development machine (20–26 s in the
//! issue), against 0.16 s with the name set now used (`load_json` in src/problem.rs).

use std::ffi::CString;
use std::time::Instant;

use sinew::problem::{sinew_problem, sinew_problem_bone_count, sinew_problem_free, sinew_problem_from_json};
use sinew::sinew_status;

/// A chain of `n` bones along +Z, each named after its index, with one goal on the last.
fn chain_json(n: usize) -> String {
    let mut s = String::with_capacity(n * 90);
    s.push_str(r#"{"format": "sinew.problem/1", "bones": [{"name": "b0", "head": [0,0,0], "tail": [0,0,0.01]}"#);
    for i in 1..n {
        s.push_str(&format!(
            r#", {{"name": "b{i}", "parent": "b{}", "head": [0,0,{}], "tail": [0,0,{}]}}"#,
            i - 1,
            0.01 * i as f64,
            0.01 * (i + 1) as f64
        ));
    }
    s.push_str(&format!(r#"], "goals": [{{"bone": "b{}", "target": [1,0,1], "chain_length": 3}}]}}"#, n - 1));
    s
}

#[test]
fn a_100k_bone_chain_loads_through_the_c_api() {
    const N: usize = 100_000;
    let text = CString::new(chain_json(N)).unwrap();
    let mut problem: *mut sinew_problem = std::ptr::null_mut();
    let t = Instant::now();
    // SAFETY: a NUL-terminated string and a writable handle output.
    let status = unsafe { sinew_problem_from_json(text.as_ptr(), &mut problem) };
    let elapsed = t.elapsed();
    assert_eq!(status, sinew_status::Ok);
    let mut count = 0usize;
    // SAFETY: the live handle just made.
    assert_eq!(unsafe { sinew_problem_bone_count(problem, &mut count) }, sinew_status::Ok);
    assert_eq!(count, N);
    // SAFETY: made above, freed once.
    unsafe { sinew_problem_free(problem) };
    eprintln!("loaded a {N}-bone chain through sinew_problem_from_json in {:.3} s", elapsed.as_secs_f64());
}
