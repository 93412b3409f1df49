#!/usr/bin/env bash
# Execute every notebook headless and fail on the first error.
#
#   notebooks/run.sh            # all notebooks
#   notebooks/run.sh 02-replay.ipynb
#
# Needs Debian's Jupyter: apt-get install -y jupyter-nbconvert python3-ipykernel python3-nbclient
# (a pyenv python3 earlier on PATH lacks them, so Debian's tools are called by
# absolute path). Builds bin/steplab first so the notebooks use the current code.
# Executed copies go to a temporary directory (or $NB_EXEC_DIR); the
# notebooks' own outputs go to notebooks/out/ (git-ignored) or $STEPLAB_NB_OUT.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
export PATH="/usr/bin:/usr/local/go/bin:$PATH"

jupyter=/usr/bin/jupyter
if [[ ! -x $jupyter ]]; then
	jupyter="$(command -v jupyter || true)"
fi
if [[ -z $jupyter ]] || ! "$jupyter" nbconvert --version >/dev/null 2>&1; then
	echo "run.sh: jupyter nbconvert not found: apt-get install -y jupyter-nbconvert python3-ipykernel python3-nbclient" >&2
	exit 2
fi

(cd "$root" && go build -o bin/steplab ./cmd/steplab)
export STEPLAB_BIN="$root/bin/steplab"

out="${NB_EXEC_DIR:-$(mktemp -d -t steplab-notebooks-XXXXXX)}"
mkdir -p "$out"
if [[ $# -gt 0 ]]; then
	nbs=("$@")
else
	nbs=("$here"/[0-9]*.ipynb)
fi
status=0
for nb in "${nbs[@]}"; do
	[[ -f $nb ]] || nb="$here/$nb"
	name="$(basename "$nb")"
	start=$(date +%s%N)
	if (cd "$here" && "$jupyter" nbconvert --to notebook --execute \
		--ExecutePreprocessor.timeout=300 --ExecutePreprocessor.kernel_name=python3 \
		--output-dir "$out" "$nb" >"$out/$name.log" 2>&1); then
		ms=$(( ($(date +%s%N) - start) / 1000000 ))
		printf 'ok    %-22s %4d.%01d s\n' "$name" $((ms / 1000)) $((ms % 1000 / 100))
	else
		printf 'FAIL  %-22s (log: %s)\n' "$name" "$out/$name.log"
		tail -n 40 "$out/$name.log" >&2
		status=1
	fi
done
echo "executed notebooks in $out"
exit $status
