#!/usr/bin/env bash
# Build one Slurm release from source into /opt/slurm-<version> (daemons, client commands,
# headers and libslurm for pyslurm), on this Debian 12 host.
#
#   build-slurm.sh VERSION [--check|--deps|--built]  VERSION: 24.11, 25.11 or 26.05 (slurm-releases.txt)
#
# The tarball: $HPCLAUNCH_SLURM_TARBALL, else slurm-<release>.tar.xz in $HPCLAUNCH_SLURM_SRC
# (default: shared/slurm-src beside the repository, as on our machines). Its sha256 must be
# the one slurm-releases.txt records (or $HPCLAUNCH_SLURM_SHA256), or nothing is built. Nothing is downloaded: without the
# tarball the script says what to fetch and where to put it (exit 2).
# --check: verify the tarball and stop. --deps: install the build dependencies (when the
# build is not done yet) and stop, so that cluster.sh can run apt in the foreground and the
# compilation in the background. --built: exit 0 if this version is built, 1 if not.
# A finished build is stamped (version + sha256) and
# not repeated. Measured on a 2-core machine: ~3.5 min for 25.11 with make -j2 (plus ~1 min of
# build dependencies the first time).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
RELEASES=$HERE/slurm-releases.txt
# apt_install (Debian packages without starting their daemons); then our own log and die.
# shellcheck source=lib/daemons.sh
source "$HERE/lib/daemons.sh"
# shellcheck source=lib/host.sh
source "$HERE/lib/host.sh"

log() { printf '[build-slurm] %s\n' "$*" >&2; }
die() { printf '[build-slurm] error: %s\n' "$1" >&2; exit "${2:-1}"; }
known() { awk '!/^#/ && NF {print $1}' "$RELEASES" | paste -sd' '; }

# Debian 12 packages Slurm needs to build with what the test cluster uses. Without
# libmariadb-dev-compat, configure finds no mysql_config and silently skips the
# accounting_storage/mysql plugin slurmdbd needs (shared/slurm-src/README.md).
BUILD_DEPS=(build-essential libmunge-dev munge libmariadb-dev libmariadb-dev-compat libjson-c-dev
  libyaml-dev libhttp-parser-dev libjwt-dev libpam0g-dev libhwloc-dev libdbus-1-dev liblz4-dev)

version=${1:-}
check_only=0 deps_only=0 built_only=0
[[ ${2:-} == --check ]] && check_only=1
[[ ${2:-} == --deps ]] && deps_only=1
[[ ${2:-} == --built ]] && built_only=1
[[ -n $version ]] || die "usage: $0 VERSION [--check|--deps|--built] (versions: $(known))" 2

read -r _ tarball sha tag < <(awk -v v="$version" '$1 == v' "$RELEASES") || true
if [[ -z ${tarball:-} ]]; then
  if [[ $version == 22.05 ]]; then
    die "Slurm 22.05 comes from Debian 12's packages (cluster.sh installs it); nothing to build" 2
  fi
  die "no Slurm $version in $RELEASES (known: $(known))" 2
fi

# A build stamped with this release's sha256 came from the checked tarball: nothing to do,
# and the tarball need not be here any more.
prefix=/opt/slurm-$version
stamp=$prefix/.hpclaunch-build
if ((!check_only)) && [[ -f $stamp && $(<"$stamp") == "$version ${HPCLAUNCH_SLURM_SHA256:-$sha}" ]]; then
  ((built_only)) || log "Slurm $version already built in $prefix"
  exit 0
fi
((built_only)) && exit 1

src_dir=${HPCLAUNCH_SLURM_SRC:-$REPO/../shared/slurm-src}
file=${HPCLAUNCH_SLURM_TARBALL:-$src_dir/$tarball}
# A tarball made another way (SchedMD's download site, another git archive) has another
# sha256: HPCLAUNCH_SLURM_SHA256 states the one you checked yourself.
sha=${HPCLAUNCH_SLURM_SHA256:-$sha}
if [[ ! -f $file ]]; then
  die "no tarball for Slurm $version at $file. Put $tarball (SchedMD's tag $tag,
  exported with git archive; sha256 $sha) in $src_dir, or download Slurm $version from
  SchedMD (https://download.schedmd.com/slurm/), check its sha256 against SchedMD's, and
  point HPCLAUNCH_SLURM_TARBALL at it with HPCLAUNCH_SLURM_SHA256 set to that sha256" 2
fi
have=$(sha256sum "$file" | cut -d' ' -f1)
if [[ $have != "$sha" ]]; then
  die "$file: sha256 $have, but $sha was expected for Slurm $version: not building from it"
fi
log "$file: sha256 ok ($tag)"
((check_only)) && exit 0

[[ $(id -u) == 0 ]] || die "run as root: it installs build dependencies and writes $prefix"
apt_install "${BUILD_DEPS[@]}"
((deps_only)) && exit 0

t0=$SECONDS
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xf "$file"
cd "$work"/slurm-*
log "configure (prefix $prefix)"
# A test cluster's build, made for compile time: no optimisation (-O0) and no slurmrestd
# (nothing here uses it; its OpenAPI plugins are much of the tree). 2-core machine,
# 2026-11-27, 25.11.7, one after the other: configure + make -j2 204 s this way, 362 s
# with -O2 and slurmrestd.
./configure --prefix="$prefix" --sysconfdir="$prefix/etc" --disable-debug --without-rpath \
  --disable-optimizations --disable-slurmrestd \
  >"$work/configure.log" 2>&1 || { tail -30 "$work/configure.log" >&2; die "configure failed"; }
# The accounting plugin is what slurmdbd needs; configure skips it without a word.
grep -q 'accounting_storage/mysql' config.log 2>/dev/null ||
  grep -rqs 'HAVE_MYSQL' config.h || die "configure found no MariaDB client: install libmariadb-dev-compat"
log "make -j$(nproc)"
make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -30 "$work/make.log" >&2; die "make failed"; }
make install >"$work/install.log" 2>&1 || { tail -30 "$work/install.log" >&2; die "make install failed"; }
echo "$version $sha" >"$stamp"
# slurmctld -V: 25.11's client commands want a slurm.conf even for --version.
log "Slurm $version built in $prefix in $((SECONDS - t0)) s ($("$prefix/sbin/slurmctld" -V))"
