# Sourced by scripts/demo and scripts/test: installs what is missing on a
# fresh Debian machine (Go from Debian when none is installed, then the Go
# toolchain go.mod names through the module proxy), and nothing otherwise.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

apt_install() {
	local missing=()
	for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "setup: installing ${missing[*]}" >&2
	local sudo=""
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	$sudo apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2
}

if ! command -v go >/dev/null 2>&1; then
	apt_install golang-go ca-certificates git
fi
# An older Go fetches the toolchain go.mod asks for from the module proxy.
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
if ! command -v gcc >/dev/null 2>&1; then
	apt_install gcc libc6-dev
fi
# go-nvml's header marks old NVML calls deprecated; silence those warnings.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"
go mod download >&2
