#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 180) each, seeding the corpus from tests/data.
#   fuzz/run.sh [SECONDS]
# Needs nightly Rust and cargo-fuzz (`cargo install cargo-fuzz`). Crashes land in
# fuzz/artifacts/<target>/; copy each into fuzz/regressions/ once fixed, so that
# `cargo test -p sinew --test hardening` replays it on stable Rust.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-180}
for target in load_solve_fabrik load_solve_dls; do
  mkdir -p "corpus/$target"
  cp ../tests/data/*.json regressions/* "corpus/$target/" 2>/dev/null || true
  rm -f "corpus/$target/README.md"
  cargo +nightly fuzz run "$target" "corpus/$target" -- \
    -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -dict=json.dict -print_final_stats=1
done
