#!/usr/bin/env bash
# Build mirrord's .deb or .rpm from the work tree: packaging/build.sh deb|rpm [OUTDIR]
#
# Both packages carry the same tree (staged once per input hash under build/out/packaging/):
#   /opt/mirrord                     virtualenv made by Debian's python3.11, mirrord + pinned deps
#                                    (pyspark with only the jars of packaging/spark-jars.txt)
#   /opt/mirrord/share/mirrord/jars  Spark's Kafka connector jars (from `make jars`)
#   /usr/bin/mirrord                 symlink to /opt/mirrord/bin/mirrord
#   <unitdir>/mirrord{,@}.service    from systemd/
#   /etc/mirrord/*                   samples from etc/, conffiles, 0640 root:mirrord after install
#   /usr/share/mirrord/{grafana,prometheus}
# The built package is cached under .cache/packages/<hash of every input>/, so a second build of
# the same tree is a copy. Nothing is downloaded at install or run time.
set -euo pipefail

KIND=${1:?usage: build.sh deb|rpm [OUTDIR]}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUTDIR=$(mkdir -p "${2:-$ROOT/dist}" && cd "${2:-$ROOT/dist}" && pwd)
PKG=$ROOT/packaging
BUILD_PYTHON=${BUILD_PYTHON:-/usr/bin/python3.11}
SPARK_JARS=${SPARK_JARS:-$ROOT/.cache/jars/spark}
CACHE=${PACKAGE_CACHE:-$ROOT/.cache/packages}
PREFIX=/opt/mirrord
MAINTAINER=${PKG_MAINTAINER:-mirrord maintainers <mirrord@example.org>}
# Changelog dates: the last commit's time, so rebuilding a commit gives the same metadata.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

UPSTREAM=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$ROOT/mirrord/__init__.py")
VERSION=${PKG_VERSION:-$UPSTREAM}
[ -n "$VERSION" ] || { echo "build.sh: no __version__ in mirrord/__init__.py" >&2; exit 1; }

die() { echo "build.sh: $*" >&2; exit 1; }
[ -f "$PKG/spark-jars.txt" ] || die "packaging/spark-jars.txt missing: \`make jar-list\` records it"
[ -x "$BUILD_PYTHON" ] || die "$BUILD_PYTHON missing: the venv must be built by Debian's python3.11 (make system-deps)"
ls "$SPARK_JARS"/spark-sql-kafka-*.jar >/dev/null 2>&1 || die "no Spark Kafka jars in $SPARK_JARS: run \`make jars\`"
for f in systemd/mirrord.service systemd/mirrord@.service etc/mirrord.conf etc/consumer.properties \
         etc/producer.properties etc/default/mirrord; do
  [ -f "$ROOT/$f" ] || die "$f missing"
done

# Every file the package is made from, in a stable order; their hash names the staged tree, and
# with the kind, version and maintainer the cached package.
inputs() {
  cd "$ROOT"
  {
    find mirrord systemd etc packaging/deb packaging/rpm -type f \
      ! -name '*.pyc' ! -path '*/__pycache__/*' 2>/dev/null
    printf '%s\n' packaging/build.sh packaging/constraints.txt packaging/spark-jars.txt setup.cfg pyproject.toml \
      README.md LICENSE
  } | while read -r f; do [ -f "$f" ] && echo "$f"; done | LC_ALL=C sort -u
}
TREE=$( { "$BUILD_PYTHON" -V; inputs | xargs sha256sum; ls -l --time-style=+ "$SPARK_JARS"/*.jar | awk '{print $5, $NF}'; } \
  | sha256sum | cut -c1-16)
KEY=$(echo "$TREE $KIND $VERSION $MAINTAINER" | sha256sum | cut -c1-16)

case $KIND in
  deb) NAME=mirrord_${VERSION}_amd64.deb ;;
  rpm) NAME=mirrord-${VERSION//-/_}-1.x86_64.rpm ;;
  *) die "unknown package kind $KIND (deb or rpm)" ;;
esac
if [ -f "$CACHE/$KEY/$NAME" ]; then
  touch "$CACHE/$KEY"   # recently used: kept by the pruning below
  cp "$CACHE/$KEY/$NAME" "$OUTDIR/$NAME"
  echo "$OUTDIR/$NAME (cached, key $KEY)"
  exit 0
fi

OUT=$ROOT/build/out/packaging
WORK=$OUT/$KEY
STAGED=$OUT/stage-$TREE   # kept: the next kind or version of the same tree starts from it
mkdir -p "$OUT"
rm -rf "$WORK"
mkdir -p "$WORK"

# --- the tree shared by both formats ------------------------------------------------------------

# pip's pyspark is a whole Spark distribution (~480 MB, 323 jars). mirrord runs its Python package, its
# launcher (bin/spark-submit) and the jars of packaging/spark-jars.txt: those any class was loaded from
# in every mode mirrord supports (`make jar-list` records them). The samples go too.
trim_pyspark() {
  local pyspark jars keep missing jar
  pyspark=$1/lib/python3.11/site-packages/pyspark
  jars=$pyspark/jars
  [ -d "$jars" ] || die "no $jars in the staged venv"
  keep=$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$PKG/spark-jars.txt")
  missing=$(for jar in $keep; do [ -f "$jars/$jar" ] || echo "$jar"; done)
  [ -z "$missing" ] || die "packaging/spark-jars.txt names jars pyspark lacks ($(echo $missing)):" \
    "\`make jar-list\` after a pyspark upgrade"
  (cd "$jars" && find . -name '*.jar' | sed 's|^\./||') | while read -r jar; do
    grep -qxF "$jar" <<<"$keep" || rm -f "$jars/$jar"
  done
  find "$jars" -mindepth 1 -type d -empty -delete
  rm -rf "$pyspark/examples" "$pyspark/data"
}

stage() {
  local venv=$STAGE$PREFIX src=$STAGED/src
  # Build the wheel from a copy, so setuptools' build/ and egg-info stay out of the work tree.
  mkdir -p "$src"
  (cd "$ROOT" && tar cf - --exclude=__pycache__ --exclude='*.pyc' \
     mirrord setup.cfg pyproject.toml $(ls README.md LICENSE 2>/dev/null)) | tar xf - -C "$src"

  "$BUILD_PYTHON" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --no-compile --no-warn-script-location \
    -c "$PKG/constraints.txt" "$src"
  # The installed tree is managed by the package manager: no pip or setuptools at run time.
  "$venv/bin/python" -m pip uninstall -q -y pip setuptools
  trim_pyspark "$venv"
  find "$venv" -depth -type d -name __pycache__ -exec rm -rf {} +

  # Relocate: the venv was made at $STAGE/opt/mirrord and will live at /opt/mirrord.
  grep -rlIF -- "$STAGE" "$venv" | while read -r f; do
    sed -i "s|$STAGE$PREFIX|$PREFIX|g" "$f"
  done
  if grep -rlF -- "$STAGE" "$venv" >/dev/null; then
    die "staging path left in binary files: $(grep -rlF -- "$STAGE" "$venv" | head -5)"
  fi
  # Debian's python3.11 made the venv; point its interpreter at the versioned name so the
  # package keeps working where /usr/bin/python3 is another version (the rpm's targets).
  ln -sfn /usr/bin/python3.11 "$venv/bin/python3.11"
  ln -sfn python3.11 "$venv/bin/python3"
  ln -sfn python3.11 "$venv/bin/python"
  find "$venv" -name '*.cmd' -delete   # pyspark's Windows launchers
  rm -f "$venv"/bin/activate.csh "$venv"/bin/activate.fish "$venv"/bin/Activate.ps1
  find "$venv" -path '*.dist-info/direct_url.json' -delete

  install -d -m 0755 "$venv/share/mirrord/jars"
  install -m 0644 "$SPARK_JARS"/*.jar "$venv/share/mirrord/jars/"

  install -d -m 0755 "$STAGE/usr/bin"
  ln -s "$PREFIX/bin/mirrord" "$STAGE/usr/bin/mirrord"

  install -d -m 0755 "$STAGE/etc/mirrord"
  for f in mirrord.conf consumer.properties producer.properties; do
    install -m 0640 "$ROOT/etc/$f" "$STAGE/etc/mirrord/$f"
  done

  # The units' Documentation= points here.
  install -d -m 0755 "$STAGE/usr/share/doc/mirrord"
  [ ! -f "$ROOT/README.md" ] || install -m 0644 "$ROOT/README.md" "$STAGE/usr/share/doc/mirrord/README.md"

  local share=$STAGE/usr/share/mirrord
  install -d -m 0755 "$share/grafana" "$share/prometheus"
  for f in "$ROOT"/etc/grafana/*.json; do [ -f "$f" ] && install -m 0644 "$f" "$share/grafana/"; done
  for f in "$ROOT"/etc/prometheus/*.yml; do
    [ -f "$f" ] && case $f in *.test.yml) ;; *) install -m 0644 "$f" "$share/prometheus/" ;; esac
  done

  # Normalise modes: pip and tar keep whatever the wheel authors had.
  find "$STAGE" -type d -exec chmod 0755 {} +
  find "$venv" -type f -perm /111 -exec chmod 0755 {} + -o -type f -exec chmod 0644 {} +
  find "$venv" -type f -name '*.so*' -exec chmod 0644 {} +
  chmod 0640 "$STAGE"/etc/mirrord/*
}

# --- .deb ------------------------------------------------------------------------------------------

build_deb() {
  local unitdir=$STAGE/lib/systemd/system doc=$STAGE/usr/share/doc/mirrord
  install -d -m 0755 "$unitdir" "$doc" "$STAGE/usr/share/lintian/overrides"
  install -m 0644 "$ROOT/systemd/mirrord.service" "$ROOT/systemd/mirrord@.service" "$unitdir/"
  install -m 0644 "$PKG/deb/copyright" "$doc/copyright"
  sed "s/@VERSION@/$VERSION/; s/@MAINTAINER@/$MAINTAINER/; s/@DATE@/$(LC_ALL=C date -R -d @"$SOURCE_DATE_EPOCH")/" \
    "$PKG/deb/changelog.in" | gzip -9n > "$doc/changelog.gz"
  chmod 0644 "$doc/changelog.gz"
  install -m 0644 "$PKG/deb/lintian-overrides" "$STAGE/usr/share/lintian/overrides/mirrord"
  install -d -m 0755 "$STAGE/etc/default"
  install -m 0644 "$ROOT/etc/default/mirrord" "$STAGE/etc/default/mirrord"

  local ctl=$STAGE/DEBIAN
  install -d -m 0755 "$ctl"
  local size
  size=$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)
  sed "s/@VERSION@/$VERSION/; s/@SIZE@/$size/; s/@MAINTAINER@/$MAINTAINER/" "$PKG/deb/control.in" > "$ctl/control"
  (cd "$STAGE" && find etc -type f | LC_ALL=C sort | sed 's|^|/|') > "$ctl/conffiles"
  for s in postinst prerm postrm; do install -m 0755 "$PKG/deb/$s" "$ctl/$s"; done
  (cd "$STAGE" && find . -path ./DEBIAN -prune -o -type f -print0 | LC_ALL=C sort -z \
     | xargs -0 md5sum | sed 's|  \./|  |') > "$ctl/md5sums"
  chmod 0644 "$ctl/control" "$ctl/conffiles" "$ctl/md5sums"

  # gzip -1: about 5 s for the ~215 MB tree, mostly jars that are compressed already (for the untrimmed
  # ~750 MB tree: 35 s, gzip -6 60 s for 3% less, xz minutes); zstd is faster but lintian
  # rejects it (malformed-deb-archive: not a format of the Debian archive).
  dpkg-deb --root-owner-group -Zgzip -z1 --build "$STAGE" "$WORK/$NAME" >/dev/null
}

# --- .rpm ------------------------------------------------------------------------------------------

build_rpm() {
  local top=$WORK/rpmbuild
  mkdir -p "$top"/{BUILD,RPMS,SOURCES,SPECS,SRPMS,BUILDROOT}
  install -m 0644 "$ROOT/systemd/mirrord.service" "$ROOT/systemd/mirrord@.service" "$top/SOURCES/"
  install -m 0644 "$ROOT/etc/default/mirrord" "$top/SOURCES/mirrord.sysconfig"
  rpmbuild -bb --quiet \
    --define "_topdir $top" \
    --define "_mirrord_stage $STAGE" \
    --define "_mirrord_version ${VERSION//-/_}" \
    --define "_mirrord_maintainer $MAINTAINER" \
    --define "_sourcedir $top/SOURCES" \
    "$PKG/rpm/mirrord.spec" >"$WORK/rpmbuild.log" 2>&1 || { tail -40 "$WORK/rpmbuild.log" >&2; exit 1; }
  cp "$top/RPMS/x86_64/$NAME" "$WORK/$NAME"
}

exec 9>"$OUT/.stage.lock"
flock 9
if [ ! -f "$STAGED/.complete" ]; then
  find "$OUT" -maxdepth 1 -name 'stage-*' -exec rm -rf {} +
  STAGE=$STAGED/root
  stage
  rm -rf "$STAGED/src"
  touch "$STAGED/.complete"
fi
STAGE=$WORK/root
cp -al "$STAGED/root" "$STAGE"   # hard links: the format-specific files below are new files
flock -u 9

"build_$KIND"

mkdir -p "$CACHE/$KEY"
cp "$WORK/$NAME" "$CACHE/$KEY/$NAME"
# Keep the six newest packages (a tree's .deb, .rpm and upgrade-test .deb, and the previous tree's).
ls -1dt "$CACHE"/*/ | tail -n +7 | xargs -r rm -rf
cp "$WORK/$NAME" "$OUTDIR/$NAME"
rm -rf "$WORK"
echo "$OUTDIR/$NAME (built, key $KEY)"
