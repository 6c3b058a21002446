#!/bin/sh
# The default training sweep of the recommender, as it was run for src/iodiag/recommend/data/training.csv:
# inputs, then three passes over both sweeps (each pass one repetition of every setting, so repetitions are
# interleaved in time and a burst of load from other users hits one repetition, not all three), then collect.
# Usage: scripts/recommender_sweep.sh [SWEEPS_DIR]  (inputs go to /tmp/iodiag-train/data, the specs' [vars] data); then
#   iodiag recommend train SWEEPS_DIR/{convert,read}-p{1,2,3} \
#       --table-out src/iodiag/recommend/data/training.csv --out src/iodiag/recommend/data/model.json
#   iodiag recommend evaluate --markdown docs/recommender/validation.md
set -e
D=/tmp/iodiag-train/data
S=${1:-/tmp/iodiag-train/sweeps}
here=$(cd "$(dirname "$0")/.." && pwd)
sh "$here/docs/recommender/make-data.sh" "$D"
for pass in 1 2 3; do
    for w in convert read; do
        iodiag sweep run "$here/docs/recommender/train-$w.toml" --local --dir "$S/$w-p$pass" \
            || echo "pass $pass $w: some runs failed (see $S/$w-p$pass)"
        iodiag sweep collect "$S/$w-p$pass"
    done
done
