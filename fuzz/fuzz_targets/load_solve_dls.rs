//! Raw bytes into the problem-file loader, then a dls solve (twice: from the start pose and from
//! its own solution). No panic; finite unit output for finite input.
#![no_main]

include!("check.rs");

libfuzzer_sys::fuzz_target!(|data: &[u8]| check(data, sinew::Method::Dls));
