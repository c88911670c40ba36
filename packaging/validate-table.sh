#!/usr/bin/env bash
# Regenerates the validation tables of docs/ESTIMATOR.md ("Against published measurements") from
# `shardscope-cli validate --json` on the published rows (issue 47):
#   packaging/validate-table.sh [--cli build/app/shardscope-cli] [ROWS.json]   # default ../shared/published/rows.json
# The block between the two "validate-table" markers is replaced; nothing else is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
cli=build/app/shardscope-cli
if [ "${1:-}" = --cli ]; then cli=$2; shift 2; fi
rows=${1:-../shared/published/rows.json}
[ -x "$cli" ] || { echo "validate-table: $cli is not built" >&2; exit 2; }
[ -f "$rows" ] || { echo "validate-table: $rows not found" >&2; exit 2; }
json=$(mktemp)
trap 'rm -f "$json"' EXIT
"$cli" validate --published "$rows" --calibrate leave-one-out --json >"$json"
python3 - "$json" "$rows" docs/ESTIMATOR.md <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
rows_file, md_path = sys.argv[2], sys.argv[3]
rows = doc["rows"]
out = []
n = len(rows)
ex = sum(1 for r in rows if r["expressible"])
out.append(f"`shardscope-cli validate --published {rows_file} --calibrate leave-one-out`: {n} rows, {ex} expressible.")
out.append("")
def table(title, summary, note):
    out.append(f"**{title}** ({note})")
    out.append("")
    if not summary:
        out.append("No row compares it yet.")
        out.append("")
        return
    out.append("| group | rows | mean abs error | mean signed error | max abs error |")
    out.append("|---|---|---|---|---|")
    for s in summary:
        out.append(f"| {s['group']} | {s['rows']} | {s['mean_abs_error_pct']:.1f} % | {s['mean_signed_error_pct']:+.1f} % | {s['max_abs_error_pct']:.1f} % |")
    out.append("")
table("Peak memory", doc["memory_summary"], "the allocated estimate against published allocated peaks")
table("Tokens/s per GPU", doc["speed_summary"], "uncalibrated, at the device table's peak and the default efficiency")
table("Tokens/s per GPU, calibrated leave-one-out", doc["calibrated_speed_summary"],
      "each row on the nearest other row of the same source and GPU type: the efficiency at which the estimate meets it")
table("For reference only: the allocated estimate against another measure", doc["memory_other_measure_summary"],
      "reserved, system or unstated figures: not an error of the estimate, the gap a reserved-memory model has to close")
cov = doc["interval_coverage"]
out.append(f"**Uncalibrated interval** (efficiency {cov['efficiency_low']}-{cov['efficiency_high']}, the calibration table's band): "
           f"covers the published tokens/s in {cov['covered']} of {cov['rows']} rows (the band was fitted on these rows).")
out.append("")
out.append("**What the rows need that the estimator lacks** (rows needing each):")
out.append("")
out.append("| concept | rows |")
out.append("|---|---|")
for m in doc["missing_concepts"]:
    out.append(f"| {m['concept']} | {len(m['rows'])} |")
out.append("")
out.append("**Comparison sets** (the published order against the estimate's, best first):")
out.append("")
if not doc["comparison_sets"]:
    out.append("No set has two rows the estimate can predict.")
else:
    out.append("| set | figure | published | estimate | |")
    out.append("|---|---|---|---|---|")
    for c in doc["comparison_sets"]:
        verdict = "same" if c["same_order"] else ("ties" if c["predicted_tie"] else "differs")
        out.append(f"| {c['set']} | {c['figure']} | {' > '.join(c['published_order'])} | {' > '.join(c['predicted_order'])} | {verdict} |")
text = "\n".join(out) + "\n"
md = open(md_path).read()
begin, end = "<!-- validate-table: begin -->\n", "<!-- validate-table: end -->"
i, j = md.index(begin) + len(begin), md.index(end)
open(md_path, "w").write(md[:i] + text + md[j:])
PY
echo "validate-table: docs/ESTIMATOR.md updated from $rows"
