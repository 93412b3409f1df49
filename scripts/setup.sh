# Sourced by scripts/demo, scripts/test and scripts/bench: installs what is
# missing on a fresh Debian machine, and nothing otherwise: with everything
# present it runs no apt command at all.
#
#   go            the toolchain go.mod names comes through the module proxy;
#                 Debian's golang-go (and ca-certificates for the proxy's
#                 HTTPS) only bootstraps it when no go is on PATH
#   git           go build stamps the commit into the binary
#   gcc libc6-dev cgo, for go-nvml (capture's GPU sampling, in a build
#                 with -tags nvml)
#
# Debian packages are installed without their recommends (a recommended
# package nothing here uses is most of an install's time), each only when
# dpkg-query does not list it as installed; a tool found on PATH (command -v)
# needs no package.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="/usr/local/go/bin:$HOME/go/bin:$PATH"

# apt_install PKG...: installs the packages dpkg-query does not list as
# installed, without recommends; none missing, no apt command runs.
apt_install() {
	local missing=()
	for p in "$@"; do
		[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null)" = "ii " ] || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	local sudo="" log="${TMPDIR:-/tmp}/steplab-setup-apt.log"
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	echo "setup: installing ${missing[*]} (without recommends; apt's output in $log)" >&2
	# apt and dpkg print a thousand lines on a fresh machine: they go to the
	# log, which a failure names.
	if ! { $sudo apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >>"$log" 2>&1; then
		echo "setup: installing ${missing[*]} failed; the last lines of $log:" >&2
		tail -n 20 "$log" >&2
		return 1
	fi
}

# have CMD...: whether any of the commands is on PATH.
have() {
	local c
	for c in "$@"; do command -v "$c" >/dev/null 2>&1 && return 0; done
	return 1
}

have go || apt_install golang-go ca-certificates
have git || apt_install git
have gcc || apt_install gcc libc6-dev
# An older Go fetches the toolchain go.mod asks for from the module proxy.
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
# go-nvml's header marks old NVML calls deprecated; silence those warnings
# where a build or test has -tags nvml.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} -Wno-deprecated-declarations"
go mod download >&2
