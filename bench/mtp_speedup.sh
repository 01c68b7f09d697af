#!/usr/bin/env bash
# MTP speculative decoding on the CPU: batch-1 decode tok/s without drafts and with the checkpoint's
# MTP layer drafting N = 1, 2, 3 tokens, and the acceptance rate per draft position, in one run with
# the configurations interleaved (--reps rounds) so that load drift on a shared machine hits all alike.
#
#   bench/mtp_speedup.sh MODEL PROMPTS [--fp4serve build/fp4serve] [--tokenizer DIR] [-n 64] [--reps 2]
#                        [--ignore-eos]
#
# PROMPTS: a `generate --batch` file (text lines, or `ids: 1,2,3`), run one request at a time
# (--max-num-seqs 1). Decode tok/s is generate's "decode:" line: tokens after each request's first
# over its first-to-last-token time (prefill excluded; the MTP passes and verify steps included).
# Acceptance: the "SpecDecoding metrics:" line (vLLM's per-position rate: accepted at position i /
# drafts). Prints one row per configuration and round, then the best of the rounds.
set -euo pipefail

FP4SERVE=build/fp4serve
TOKENIZER=""
N_TOKENS=64
REPS=2
EXTRA=()
MODEL=${1:?MODEL}
PROMPTS=${2:?PROMPTS}
shift 2
while [ $# -gt 0 ]; do
  case $1 in
    --fp4serve) FP4SERVE=$2; shift 2 ;;
    --tokenizer) TOKENIZER=$2; shift 2 ;;
    -n) N_TOKENS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --ignore-eos) EXTRA+=(--ignore-eos); shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$TOKENIZER" ] && EXTRA+=(--tokenizer "$TOKENIZER")

run() {  # DRAFTS -> "tok/s<TAB>acceptance"
  local drafts=$1 spec=() out
  [ "$drafts" -gt 0 ] && spec=(--speculative-config "{\"method\": \"mtp\", \"num_speculative_tokens\": $drafts}")
  out=$("$FP4SERVE" generate --model "$MODEL" --batch "$PROMPTS" -n "$N_TOKENS" --max-num-seqs 1 \
        --max-model-len 4096 --kv-cache-memory 1GiB "${EXTRA[@]}" "${spec[@]}" 2>&1 >/dev/null)
  local tps acc
  tps=$(sed -n 's/^decode: .*: \([0-9.]*\) tok\/s$/\1/p' <<<"$out")
  acc=$(sed -n 's/^SpecDecoding metrics: Mean acceptance length: \([0-9.]*\), .*Per-position acceptance rate: \(.*\), Avg Draft acceptance rate: \(.*\)$/mean length \1, per position \2, avg \3/p' <<<"$out")
  printf '%s\t%s\n' "${tps:-?}" "${acc:--}"
}

echo "model: $MODEL; prompts: $PROMPTS ($(wc -l <"$PROMPTS") requests, batch 1, -n $N_TOKENS); load: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A best
for rep in $(seq 1 "$REPS"); do
  for drafts in 0 1 2 3; do
    IFS=$'\t' read -r tps acc < <(run "$drafts")
    printf 'round %d  %-8s decode %8s tok/s  %s\n' "$rep" "$([ "$drafts" -eq 0 ] && echo no-MTP || echo "MTP N=$drafts")" "$tps" "$acc"
    if [ "$tps" != "?" ] && awk "BEGIN{exit !($tps > ${best[$drafts]:-0})}"; then best[$drafts]=$tps; fi
  done
done
for drafts in 0 1 2 3; do
  printf 'best     %-8s decode %8s tok/s  (%sx)\n' "$([ "$drafts" -eq 0 ] && echo no-MTP || echo "MTP N=$drafts")" \
    "${best[$drafts]:-?}" "$(awk "BEGIN{printf \"%.2f\", ${best[$drafts]:-0} / ${best[0]:-1}}")"
done
