#!/usr/bin/env bash
# Captures the real vLLM CPU runs in this folder (see README.md): one `slotune bench` per rate
# against a vLLM server already listening on $URL, each run's requests as JSONL, and the
# machine's load average before and after each run in load.txt. NICE="nice -n -10" gives the
# client a larger share of a shared machine (renice the server's threads the same way).
set -euo pipefail
URL=${URL:-http://127.0.0.1:18431}
TOKENIZER=${TOKENIZER:?the tiny model directory (its tokenizer gives exact prompt lengths)}
SLOTUNE=${SLOTUNE:-.venv/bin/slotune}
OUT=${OUT:-$(dirname "$0")}
: > "$OUT/load.txt"
for spec in "2 200 1" "6 200 2" "12 200 3" "40 200 4"; do
  read -r rate n seed <<<"$spec"
  echo "rate $rate before: $(uptime)" >> "$OUT/load.txt"
  ${NICE:-} "$SLOTUNE" bench --url "$URL" --tokenizer "$TOKENIZER" \
    --input-len lognormal:5.5,0.5 --output-len normal:128,32 \
    --rate "$rate" --num-requests "$n" --seed "$seed" --no-store \
    --requests-out "$OUT/rate-$rate.jsonl" > "$OUT/rate-$rate.summary.txt"
  echo "rate $rate after:  $(uptime)" >> "$OUT/load.txt"
done
