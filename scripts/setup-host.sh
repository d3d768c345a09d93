#!/usr/bin/env bash
# Make a Debian bookworm host ready to run Basin's local driver:
#   - PostgreSQL 15 (+ contrib), pgBackRest (WAL archiving, backups, forks),
#     PgBouncer, OpenSSL, and a toolchain for Node
#     native addons (better-sqlite3 falls back to node-gyp when no prebuilt
#     binary can be downloaded, which is always the case without internet);
#   - the pgvector and timescaledb extensions for PostgreSQL 15;
#   - basin_readonly, Basin's own library that every node preloads
#     (extensions/basin_readonly), built here with PGXS;
#   - a newer PgBouncer (trixie's source, 1.24), beside bookworm's 1.18 in
#     /usr/local/lib/basin/pgbouncer: several processes of it serve one
#     pooler's port (so_reuseport, with peering for cancel requests: 1.19+).
#
# Run as root. Only the Debian mirrors (and the npm registry) need to be
# reachable. Idempotent: when everything is present it does no network access
# and finishes in well under a second.
#
# pgvector and timescaledb are not packaged in bookworm, and no third-party
# apt repository is reachable, so we rebuild Debian trixie's *source* packages
# against bookworm's PostgreSQL 15. trixie is only ever used as a deb-src
# source through a private apt configuration: adding it as a binary source (or
# touching /etc/apt at all) would let apt pull trixie's libc & co. into the
# system.
#
# Environment overrides:
#   BASIN_CACHE          where sources lists, built .debs and logs live
#                        (default /var/cache/basin)
#   BASIN_DEBIAN_MIRROR  Debian mirror URI for the trixie sources (default:
#                        the one the system's bookworm sources use)
set -Eeuo pipefail

PG_MAJOR=15
BASIN_CACHE=${BASIN_CACHE:-/var/cache/basin}
APT_PRIVATE=$BASIN_CACHE/apt
DEB_CACHE=$BASIN_CACHE/debs
BUILD_ROOT=$BASIN_CACHE/build
LOG_DIR=$BASIN_CACHE/logs
EXT_DIR=/usr/share/postgresql/$PG_MAJOR/extension
PG_BIN=/usr/lib/postgresql/$PG_MAJOR/bin
PG_LIB=/usr/lib/postgresql/$PG_MAJOR/lib
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SOURCE_SUITE=trixie

# Runtime packages. python3/make/g++ are what node-gyp needs. passwd
# (useradd/userdel) and procps (kill) make and remove each service's own OS
# user (docs/security.md); both are on every Debian system, listed anyway.
# pgbackrest (bookworm: 2.45) archives WAL, takes backups and restores forks;
# Basin runs it with a configuration of its own per service, never the
# package's /etc/pgbackrest.conf. haproxy (bookworm: 2.6) is the stable
# endpoint of services with HA replicas; Basin runs one per installation with
# its own configuration, never the package's service. iproute2 (ip, ss) and
# nftables give each service a network namespace of its own, its ports
# translated into it (docs/security.md, A network of its own); util-linux
# (nsenter, unshare, setpriv) is essential, listed anyway. chromium (and a
# font for its pages) is for the tests alone: test/e2e/console.test.ts drives
# Debian's browser with playwright-core, which never downloads one. clang
# (with linux-libc-dev's headers) builds, in `npm run build`, the eBPF program
# that gives local clients a service's namespace address at connect, and
# bpftool loads it (src/drivers/local/network/connect-redirect.ts). xfsprogs
# makes the XFS with reflinks that test/e2e/fork-xfs.test.ts forks on.
# etcd-server and etcd-client (bookworm: 3.4) are the consensus store of HA
# across hosts: each chosen host's agent runs a member with a configuration
# of its own (docs/decisions.md, "etcd on the hosts"), and the control plane
# calls it with etcdctl; patroni (bookworm: 3.0) runs each node of a service
# that fails over across hosts. Neither package's own service is used.
RUNTIME_PKGS=(
  "postgresql-$PG_MAJOR" postgresql-contrib pgbackrest pgbouncer openssl haproxy
  etcd-server etcd-client patroni
  python3 make g++ passwd procps iproute2 nftables util-linux
  chromium fonts-dejavu-core
  clang bpftool linux-libc-dev xfsprogs
)
# Only needed while building the extensions. postgresql-server-dev-all
# provides pg_buildext and the dh "pgxs"/"pgxs_loop" sequences the trixie
# packaging uses; timescaledb is a CMake project and links OpenSSL when
# PostgreSQL was built with it (bookworm's is). dpkg-dev unpacks the sources.
BUILD_PKGS=(
  "postgresql-server-dev-$PG_MAJOR" postgresql-server-dev-all
  debhelper dpkg-dev build-essential cmake libssl-dev
)
# extension name (.control file) : trixie source package
EXTENSIONS=(vector:pgvector timescaledb:timescaledb)
# Trixie's PgBouncer, built from its source package with configure and make
# (not as a .deb: that would replace bookworm's pgbouncer package system-wide)
# and installed in a directory of its own, which Basin knows
# (src/drivers/local/endpoints/pgbouncer-install.ts). Bookworm's package stays:
# its dependencies (libevent, c-ares) are what this build links, and Basin
# falls back to its /usr/sbin/pgbouncer, one process a pooler, without this.
PGBOUNCER_PREFIX=/usr/local/lib/basin/pgbouncer
PGBOUNCER_BUILD_PKGS=(build-essential pkg-config libevent-dev libc-ares-dev libssl-dev dpkg-dev)

export DEBIAN_FRONTEND=noninteractive
# Keep apt/dpkg messages stable (we grep nothing, but logs are easier to read).
export LC_ALL=C

log() { printf 'basin-setup: %s\n' "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

CURRENT_STEP="startup"
step() {
  CURRENT_STEP=$*
  log "$*"
}
on_exit() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    log "FAILED (exit $rc) while: $CURRENT_STEP"
    log "logs: $LOG_DIR"
  fi
}
trap on_exit EXIT
# Name the unexpected command that tripped set -e, not just the step.
trap 'log "unexpected failure at line $LINENO: $BASH_COMMAND"' ERR

# Run a noisy command with its output in a log file; show the tail only when
# it fails, so a successful run stays short but a failure is self-explaining.
run_logged() {
  local name=$1
  shift
  local logf="$LOG_DIR/$name.log"
  mkdir -p "$LOG_DIR"
  if ! "$@" >"$logf" 2>&1; then
    log "command failed: $*"
    log "last lines of $logf:"
    tail -n 40 "$logf" | sed 's/^/    /' >&2
    return 1
  fi
}

missing_pkgs() {
  local p status
  for p in "$@"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [ "$status" = "install ok installed" ] || printf '%s\n' "$p"
  done
}

# The system package lists may be missing or stale on a fresh machine, but an
# update costs seconds and network: do it at most once, and only when we are
# about to install something.
APT_UPDATED=0
apt_update_once() {
  if [ "$APT_UPDATED" -eq 0 ]; then
    step "apt-get update (system sources)"
    run_logged apt-update apt-get update || die "apt-get update failed"
    APT_UPDATED=1
  fi
}

ensure_pkgs() {
  local what=$1
  shift
  local missing
  mapfile -t missing < <(missing_pkgs "$@")
  [ "${#missing[@]}" -eq 0 ] && return 0
  apt_update_once
  step "installing $what: ${missing[*]}"
  run_logged "apt-install-$what" \
    apt-get install -y --no-install-recommends "${missing[@]}" ||
    die "could not install $what packages: ${missing[*]}"
}

# Print the mirror URI the system uses for the main bookworm archive, looking
# at both one-line (.list) and deb822 (.sources) files, so that trixie sources
# come from the same (reachable) mirror host.
debian_mirror() {
  if [ -n "${BASIN_DEBIAN_MIRROR:-}" ]; then
    printf '%s\n' "${BASIN_DEBIAN_MIRROR%/}"
    return
  fi
  local f uri=""
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri=$(awk '
      $1 == "deb" || $1 == "deb-src" {
        i = 2
        if ($i ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
        if ($(i + 1) == "bookworm") { print $i; exit }
      }' "$f")
    [ -n "$uri" ] && break
  done
  if [ -z "$uri" ]; then
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] || continue
      uri=$(awk '
        BEGIN { RS = ""; FS = "\n" }
        {
          uris = ""; suites = ""; enabled = "yes"
          for (i = 1; i <= NF; i++) {
            line = $i
            if (line ~ /^[ \t]*#/) continue
            key = tolower(line); sub(/:.*/, "", key)
            val = line; sub(/^[^:]*:[ \t]*/, "", val)
            if (key == "uris") uris = val
            else if (key == "suites") suites = " " val " "
            else if (key == "enabled") enabled = tolower(val)
          }
          if (enabled != "no" && uris != "" && suites ~ / bookworm /) {
            split(uris, u, /[ \t]+/); print u[1]; exit
          }
        }' "$f")
      [ -n "$uri" ] && break
    done
  fi
  if [ -z "$uri" ]; then
    uri=http://deb.debian.org/debian
    log "no bookworm mirror found in /etc/apt, falling back to $uri"
  fi
  printf '%s\n' "${uri%/}"
}

# A private apt universe that knows only about trixie *source* packages. It
# has its own lists and cache so the system's apt state never sees trixie.
APT_PRIVATE_OPTS=(
  -o "Dir::Etc::SourceList=$APT_PRIVATE/sources.list"
  -o "Dir::Etc::SourceParts=/nonexistent"
  -o "Dir::State::Lists=$APT_PRIVATE/lists"
  -o "Dir::Cache=$APT_PRIVATE/cache"
)
PRIVATE_APT_READY=0
private_apt_update() {
  [ "$PRIVATE_APT_READY" -eq 1 ] && return 0
  local mirror keyring=/usr/share/keyrings/debian-archive-keyring.gpg signed=""
  mirror=$(debian_mirror)
  # trixie's Release is signed with keys that bookworm's debian-archive-keyring
  # already ships; pin them explicitly rather than trusting every apt key.
  [ -f "$keyring" ] && signed="[signed-by=$keyring] "
  mkdir -p "$APT_PRIVATE/lists/partial" "$APT_PRIVATE/cache/archives/partial"
  printf 'deb-src %s%s %s main\n' "$signed" "$mirror" "$SOURCE_SUITE" \
    >"$APT_PRIVATE/sources.list"
  step "apt-get update (private deb-src $SOURCE_SUITE from $mirror)"
  # --error-on=any: by default apt-get update exits 0 when a mirror is
  # unreachable, and the failure would only surface later as a puzzling
  # "You must put some 'deb-src' URIs" from apt-get source.
  run_logged apt-update-private apt-get "${APT_PRIVATE_OPTS[@]}" --error-on=any update ||
    die "could not fetch $SOURCE_SUITE source index from $mirror"
  PRIVATE_APT_READY=1
}

newest_cached_deb() {
  # The cache may hold several builds over time; take the highest version.
  local pkg=$1
  [ -d "$DEB_CACHE" ] || return 0
  find "$DEB_CACHE" -maxdepth 1 -name "${pkg}_*.deb" | sort -V | tail -n 1
}

build_extension() {
  local src=$1 binpkg=$2 dir srcdir
  ensure_pkgs build "${BUILD_PKGS[@]}"
  private_apt_update

  dir=$BUILD_ROOT/$src
  rm -rf "$dir"
  mkdir -p "$dir"
  # apt downloads as the unprivileged _apt user; let it write here.
  if id _apt >/dev/null 2>&1; then chown _apt:root "$dir"; fi

  step "fetching $SOURCE_SUITE source package $src"
  (cd "$dir" && run_logged "source-$src" apt-get "${APT_PRIVATE_OPTS[@]}" source "$src") ||
    die "apt-get source $src failed"
  srcdir=$(find "$dir" -mindepth 1 -maxdepth 1 -type d -name "$src-*" | head -n 1)
  [ -n "$srcdir" ] || die "apt-get source $src produced no source tree in $dir"

  # trixie's packaging targets PostgreSQL 17. debian/pgversions drives
  # pg_buildext's supported-versions (what gets built), and debian/control is
  # generated from control.in (postgresql-PGVERSION-*) by updatecontrol; the
  # dh pgxs sequences abort the build if control does not match.
  echo "$PG_MAJOR" >"$srcdir/debian/pgversions"
  (cd "$srcdir" && run_logged "updatecontrol-$src" pg_buildext updatecontrol) ||
    die "pg_buildext updatecontrol failed for $src"
  grep -q "^Package: $binpkg\$" "$srcdir/debian/control" ||
    die "$src packaging does not produce $binpkg after retargeting to PostgreSQL $PG_MAJOR"

  # -d: Build-Depends name postgresql-all/architecture-is-* which bookworm
  # does not have or we do not need (tests are skipped); the real build needs
  # are in BUILD_PKGS.
  step "building $binpkg (log: $LOG_DIR/build-$src.log)"
  (cd "$srcdir" && run_logged "build-$src" env \
    DEB_BUILD_OPTIONS="nocheck noautodbgsym parallel=$(nproc)" \
    dpkg-buildpackage -b -uc -us -d -Pnocheck) ||
    die "building $src failed"

  mkdir -p "$DEB_CACHE"
  local built
  built=$(find "$dir" -maxdepth 1 -name "${binpkg}_*.deb" | head -n 1)
  [ -n "$built" ] || die "build of $src produced no ${binpkg}_*.deb"
  cp -f "$built" "$DEB_CACHE/"
  # The build trees are large (timescaledb especially); the .deb is what we keep.
  rm -rf "$dir"
}

ensure_extensions() {
  local entry ext src binpkg deb
  local -a to_install=()
  for entry in "${EXTENSIONS[@]}"; do
    ext=${entry%%:*}
    src=${entry#*:}
    binpkg=postgresql-$PG_MAJOR-$src
    [ -f "$EXT_DIR/$ext.control" ] && continue
    deb=$(newest_cached_deb "$binpkg")
    if [ -z "$deb" ]; then
      build_extension "$src" "$binpkg"
      deb=$(newest_cached_deb "$binpkg")
    else
      log "reusing cached $(basename "$deb")"
    fi
    to_install+=("$deb")
  done
  [ "${#to_install[@]}" -eq 0 ] && return 0

  # apt-get (not bare dpkg -i) installs the local .debs so that any runtime
  # dependency they declare is resolved from bookworm instead of leaving a
  # half-configured package behind. The paths are absolute, which is how apt
  # tells files from package names.
  step "installing ${to_install[*]##*/}"
  if ! run_logged install-extensions apt-get install -y --no-install-recommends "${to_install[@]}"; then
    # Most likely stale/missing package lists for a dependency: refresh, retry.
    if [ "$APT_UPDATED" -eq 0 ]; then
      apt_update_once
      run_logged install-extensions apt-get install -y --no-install-recommends "${to_install[@]}" ||
        die "could not install the extension packages"
    else
      die "could not install the extension packages"
    fi
  fi
  for entry in "${EXTENSIONS[@]}"; do
    ext=${entry%%:*}
    [ -f "$EXT_DIR/$ext.control" ] || die "$EXT_DIR/$ext.control still missing after install"
  done
}

# Basin's own library (extensions/basin_readonly: read-only sessions that
# hold), compiled with PGXS against the host's PostgreSQL. A stamp holds the
# hash of the sources it was built from, so a run with the same sources does
# nothing, and a changed source (a Basin upgrade) is rebuilt. The .so is
# replaced by a rename, never rewritten in place: running servers have the
# old one mapped.
READONLY_LIB=basin_readonly
ensure_readonly_library() {
  local src=$REPO_ROOT/extensions/$READONLY_LIB stamp=$BASIN_CACHE/$READONLY_LIB.sha256 sum dir
  [ -f "$src/$READONLY_LIB.c" ] || die "missing $src/$READONLY_LIB.c (run this script from Basin's checkout)"
  sum=$(cat "$src/Makefile" "$src/$READONLY_LIB.c" | sha256sum | cut -d' ' -f1)
  if [ -f "$PG_LIB/$READONLY_LIB.so" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ]; then
    return 0
  fi
  ensure_pkgs build "postgresql-server-dev-$PG_MAJOR" build-essential
  dir=$BUILD_ROOT/$READONLY_LIB
  rm -rf "$dir"
  mkdir -p "$dir"
  cp "$src/Makefile" "$src/$READONLY_LIB.c" "$dir/"
  step "building $READONLY_LIB (log: $LOG_DIR/build-$READONLY_LIB.log)"
  run_logged "build-$READONLY_LIB" make -C "$dir" with_llvm=no PG_CONFIG="$PG_BIN/pg_config" ||
    die "building $READONLY_LIB failed"
  install -m 0644 "$dir/$READONLY_LIB.so" "$PG_LIB/.$READONLY_LIB.so.new"
  mv -f "$PG_LIB/.$READONLY_LIB.so.new" "$PG_LIB/$READONLY_LIB.so"
  printf '%s\n' "$sum" >"$stamp"
  rm -rf "$dir"
}

# PgBouncer from trixie's source package (PGBOUNCER_PREFIX above). A stamp
# holds the source package's version it was built from: a run that finds
# that binary does nothing; a newer trixie version (a security update) is
# built when the script is run after the stamp is removed. The binary is
# replaced by a rename: running poolers keep the old one.
ensure_pgbouncer() {
  local bin=$PGBOUNCER_PREFIX/bin/pgbouncer stamp=$PGBOUNCER_PREFIX/source-version dir srcdir
  if [ -x "$bin" ] && [ -s "$stamp" ]; then
    return 0
  fi
  ensure_pkgs build "${PGBOUNCER_BUILD_PKGS[@]}"
  private_apt_update
  dir=$BUILD_ROOT/pgbouncer
  rm -rf "$dir"
  mkdir -p "$dir"
  if id _apt >/dev/null 2>&1; then chown _apt:root "$dir"; fi
  step "fetching $SOURCE_SUITE source package pgbouncer"
  (cd "$dir" && run_logged source-pgbouncer apt-get "${APT_PRIVATE_OPTS[@]}" source pgbouncer) ||
    die "apt-get source pgbouncer failed"
  srcdir=$(find "$dir" -mindepth 1 -maxdepth 1 -type d -name 'pgbouncer-*' | head -n 1)
  [ -n "$srcdir" ] || die "apt-get source pgbouncer produced no source tree in $dir"
  # The release tarball carries its configure script: no autotools needed.
  # c-ares as Debian's own build; no PAM, LDAP or systemd (Basin uses none).
  step "building pgbouncer (log: $LOG_DIR/build-pgbouncer.log)"
  (cd "$srcdir" && run_logged build-pgbouncer sh -c \
    "./configure --prefix='$PGBOUNCER_PREFIX' --with-cares=yes && make -j$(nproc)") ||
    die "building pgbouncer failed"
  "$srcdir/pgbouncer" --version >/dev/null || die "the pgbouncer built does not run"
  mkdir -p "$PGBOUNCER_PREFIX/bin"
  install -m 0755 "$srcdir/pgbouncer" "$PGBOUNCER_PREFIX/bin/.pgbouncer.new"
  mv -f "$PGBOUNCER_PREFIX/bin/.pgbouncer.new" "$bin"
  basename "$(find "$dir" -maxdepth 1 -name 'pgbouncer_*.dsc' | head -n 1)" .dsc |
    sed 's/^pgbouncer_//' >"$stamp"
  rm -rf "$dir"
}

# Debian's Patroni 3.0.2 with Basin's patch (scripts/patroni/*.patch, each
# saying what it fixes): a copy of the package's python modules in
# PATRONI_PREFIX, patched there, and a wrapper PATRONI_PREFIX/bin/patroni that
# Basin runs (src/drivers/local/patroni/patroni.ts, PATRONI_BIN). Debian's
# files stay as they are. A stamp holds the hash of the patches, the wrapper
# and Debian's package version: a run that finds them unchanged does nothing,
# a new patch or a Debian update rebuilds the copy. A patch that no longer
# applies (another Debian version) stops the setup: Basin's HA needs it.
PATRONI_PREFIX=/usr/local/lib/basin-patroni
PATRONI_DEBIAN=/usr/lib/python3/dist-packages/patroni
patroni_wrapper() {
  # The name must end in "patroni" (Basin finds its nodes' processes by argv)
  # and the script must keep the __main__ guard: Patroni starts the postmaster
  # through multiprocessing's spawn, which runs this script again in the child.
  cat <<PY
#!/usr/bin/python3
# Basin's patched Patroni (scripts/setup-host.sh, ensure_patroni): the modules
# in $PATRONI_PREFIX come first, Debian's dependencies after.
import sys

sys.path.insert(0, '$PATRONI_PREFIX')

if __name__ == '__main__':
    from patroni.__main__ import main

    sys.exit(main())
PY
}
ensure_patroni() {
  local stamp=$PATRONI_PREFIX/stamp sum version dir patches p
  version=$(dpkg-query -W -f='${Version}' patroni 2>/dev/null) || die "the patroni package is not installed"
  patches=("$REPO_ROOT"/scripts/patroni/*.patch)
  [ -f "${patches[0]}" ] || die "no patches in $REPO_ROOT/scripts/patroni (run this script from Basin's checkout)"
  sum=$({ printf '%s\n' "$version"; cat "${patches[@]}"; patroni_wrapper; } | sha256sum | cut -d' ' -f1)
  if [ -x "$PATRONI_PREFIX/bin/patroni" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$sum" ]; then
    return 0
  fi
  [ -d "$PATRONI_DEBIAN" ] || die "missing $PATRONI_DEBIAN (the patroni package's modules)"
  ensure_pkgs build patch
  step "patching Debian's patroni $version into $PATRONI_PREFIX"
  dir=$PATRONI_PREFIX/.new
  rm -rf "$dir"
  mkdir -p "$dir/bin"
  cp -r "$PATRONI_DEBIAN" "$dir/patroni"
  find "$dir/patroni" -name __pycache__ -prune -exec rm -rf {} +
  for p in "${patches[@]}"; do
    (cd "$dir" && run_logged "patch-patroni" patch -p1 --forward --batch -i "$p") ||
      die "$(basename "$p") does not apply to Debian's patroni $version: Basin's patch was written for 3.0.2-1"
  done
  patroni_wrapper >"$dir/bin/patroni"
  chmod 0755 "$dir/bin/patroni"
  # Compiled here, as root: tenants' users cannot write __pycache__ beside it.
  run_logged compile-patroni /usr/bin/python3 -m compileall -q "$dir/patroni" || die "compiling the patched patroni failed"
  chmod -R u=rwX,go=rX "$dir"
  "$dir/bin/patroni" --version >/dev/null 2>&1 || die "the patched patroni does not run"
  rm -rf "$PATRONI_PREFIX/bin.old" "$PATRONI_PREFIX/patroni.old"
  # Swapped by renames: a running Patroni has its modules loaded already.
  if [ -d "$PATRONI_PREFIX/patroni" ]; then mv "$PATRONI_PREFIX/patroni" "$PATRONI_PREFIX/patroni.old"; fi
  if [ -d "$PATRONI_PREFIX/bin" ]; then mv "$PATRONI_PREFIX/bin" "$PATRONI_PREFIX/bin.old"; fi
  mv "$dir/patroni" "$PATRONI_PREFIX/patroni"
  mv "$dir/bin" "$PATRONI_PREFIX/bin"
  rm -rf "$dir" "$PATRONI_PREFIX/bin.old" "$PATRONI_PREFIX/patroni.old"
  printf '%s\n' "$sum" >"$stamp"
}

# Basin runs its own clusters and poolers on its own ports. Debian's package
# scripts create and start a default 15/main cluster on 5432 and a pgbouncer
# on 6432; stop them and keep the cluster from auto-starting. The cluster's
# (empty) data is left alone: dropping data is not this script's call.
quiet_default_services() {
  local status conf=/etc/postgresql/$PG_MAJOR/main/start.conf
  if [ -d "/etc/postgresql/$PG_MAJOR/main" ]; then
    status=$(pg_lsclusters -h 2>/dev/null | awk -v v="$PG_MAJOR" '$1 == v && $2 == "main" { print $4 }' || true)
    if [[ $status == online* ]]; then
      step "stopping Debian's default cluster $PG_MAJOR/main"
      pg_ctlcluster "$PG_MAJOR" main stop || die "pg_ctlcluster $PG_MAJOR main stop failed"
    fi
    if [ -f "$conf" ] && ! grep -qx 'manual' "$conf"; then
      log "setting $PG_MAJOR/main to start manually"
      printf '# set by Basin setup-host.sh: Basin manages its own clusters\nmanual\n' >"$conf"
    fi
  fi
  if [ -x /etc/init.d/pgbouncer ] && /etc/init.d/pgbouncer status >/dev/null 2>&1; then
    step "stopping Debian's default pgbouncer service"
    /etc/init.d/pgbouncer stop >/dev/null || die "could not stop the pgbouncer service"
  fi
  if [ -x /etc/init.d/haproxy ] && /etc/init.d/haproxy status >/dev/null 2>&1; then
    step "stopping Debian's default haproxy service"
    /etc/init.d/haproxy stop >/dev/null || die "could not stop the haproxy service"
  fi
  # Debian starts an etcd of its own (plain HTTP on localhost:2379, the port a
  # host's member listens on at its address) when the package is installed.
  local svc
  for svc in etcd patroni; do
    if [ -x "/etc/init.d/$svc" ] && "/etc/init.d/$svc" status >/dev/null 2>&1; then
      step "stopping Debian's default $svc service"
      "/etc/init.d/$svc" stop >/dev/null || die "could not stop the $svc service"
    fi
  done
}

control_version() {
  sed -n "s/^[[:space:]]*default_version[[:space:]]*=[[:space:]]*'\\([^']*\\)'.*/\\1/p" "$1"
}

main() {
  [ "$(id -u)" -eq 0 ] || die "must run as root"
  local codename
  codename=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
  [ "$codename" = bookworm ] ||
    die "expected Debian bookworm, found '${codename:-unknown}' (PostgreSQL $PG_MAJOR comes from bookworm)"

  # Serialise concurrent runs (e.g. CI jobs sharing a machine).
  mkdir -p "$BASIN_CACHE"
  exec 9>"$BASIN_CACHE/setup.lock"
  flock 9

  CURRENT_STEP="checking Debian packages"
  ensure_pkgs runtime "${RUNTIME_PKGS[@]}"
  CURRENT_STEP="checking Debian's default services"
  quiet_default_services
  CURRENT_STEP="checking pgvector/timescaledb"
  ensure_extensions
  CURRENT_STEP="checking $READONLY_LIB"
  ensure_readonly_library
  CURRENT_STEP="checking Basin's pgbouncer"
  ensure_pgbouncer
  CURRENT_STEP="checking Basin's patroni"
  ensure_patroni

  CURRENT_STEP="reporting versions"
  local pgb
  # Not piped into head: an early-closed pipe would fail under pipefail.
  pgb=$(pgbouncer --version 2>&1)
  pgb=${pgb%%$'\n'*}
  printf 'postgres:    %s\n' "$("$PG_BIN/postgres" --version)"
  printf 'pgbouncer:   %s\n' "$pgb"
  pgb=$("$PGBOUNCER_PREFIX/bin/pgbouncer" --version 2>&1)
  pgb=${pgb%%$'\n'*}
  printf 'pgbouncer (Basin, %s): %s\n' "$(cat "$PGBOUNCER_PREFIX/source-version")" "$pgb"
  printf 'pgbackrest:  %s\n' "$(pgbackrest version)"
  printf 'haproxy:     %s\n' "$(haproxy -v 2>&1 | sed -n 1p)"
  printf 'etcd:        %s\n' "$(etcd --version 2>&1 | sed -n 1p)"
  printf 'patroni:     %s\n' "$(patroni --version 2>&1 | sed -n 1p)"
  printf 'patroni (Basin, patched): %s\n' "$("$PATRONI_PREFIX/bin/patroni" --version 2>&1 | sed -n 1p)"
  printf 'vector:      %s\n' "$(control_version "$EXT_DIR/vector.control")"
  printf 'timescaledb: %s\n' "$(control_version "$EXT_DIR/timescaledb.control")"
  printf 'basin_readonly: %.12s\n' "$(cat "$BASIN_CACHE/$READONLY_LIB.sha256")"
  log "host ready"
}

main "$@"
