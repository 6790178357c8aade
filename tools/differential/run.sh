#!/bin/bash
# Differential runs against RocketMQ 5.3.3 (README.md). usage:
#   JAVA_LIB=DIR tools/differential/run.sh KIND clean|crash|expire SEED...      KIND: plain, lmq, batchcq, rocksdb, dledger, timer (clean only), compaction
#   JAVA_LIB=DIR tools/differential/run.sh KIND fixture NAME SEED CRASH [-Dopt=value ...]   (EXPIRE_FILES=N: then expire)
# JAVA_LIB: RocketMQ 5.3.3's store, common and remoting jars with their dependencies (README.md says how
# they were built). Stores, RocketMQ's answers and mismatches go to $WORK (build/differential).
set -e
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
: "${JAVA_LIB:?JAVA_LIB must name the folder of RocketMQ 5.3.3 jars (README.md)}"
WORK=${WORK:-$ROOT/build/differential}; PY=$ROOT/.venv/bin/python
mkdir -p "$WORK/classes"
javac -nowarn -encoding UTF-8 -cp "$JAVA_LIB/*" -d "$WORK/classes" "$HERE/GeoDiff5.java" 2>&1 | grep -v '^Note' || true
KIND=$1; MODE=$2; shift 2
java5() {  # the store module uses sun.nio.ch.DirectBuffer
  java $JOPTS -Dkind=$KIND -Xmx1g --add-exports java.base/sun.nio.ch=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED \
    -cp "$WORK/classes:$JAVA_LIB/*" GeoDiff5 "$@"
}
cd "$WORK"
if [ "$MODE" = fixture ]; then   # a store for tests/differential: the store as RocketMQ left it, and its answers
  N=$1; S=$2; C=$3; shift 3
  rm -rf "$N" "$N.java"
  JOPTS="-DmaxBody=300 $*" java5 write "$N" "$S" "$C" || true     # (a crash write halts the JVM)
  [ -n "$EXPIRE_FILES" ] && java5 expire "$N" "$EXPIRE_FILES"     # the oldest files deleted by the broker's cleaning
  cp -a --sparse=always "$N" "$N.java"                              # RocketMQ's recovery runs on a copy
  java5 record "$N.java" "$N.answers.json" "$([ "$C" = 0 ] && [ "$KIND" != dledger ] && echo 0 || echo 1)"
  rm -rf "$N.java"
  tar --sparse -czf "$N.tar.gz" "$N" && xz -9 -f -k "$N.answers.json"
  $PY "$HERE/compare.py" "$N" "$N.answers.json" "$N"
  exit
fi
for S in "$@"; do
  D=$KIND-$MODE$S; rm -rf "$D" "$D.java"
  if [ "$MODE" = clean ] && [ "$KIND" = dledger ]; then   # (DLedger reads need the store started: on a copy)
    java5 write "$D" "$S" 0 && cp -a --sparse=always "$D" "$D.java" && java5 record "$D.java" "$D.answers.json" 1 && rm -rf "$D.java"
  elif [ "$MODE" = clean ] && [ "$KIND" = compaction ]; then   # (CompactionLog's load may truncate or delete: on a copy, checked)
    java5 write "$D" "$S" 0 && cp -a --sparse=always "$D" "$D.java" && java5 record "$D.java" "$D.answers.json" 0 \
      && { diff -rq "$D" "$D.java" >&2 && rm -rf "$D.java" || echo "recording changed $D.java" >&2; }
  elif [ "$MODE" = clean ]; then
    java5 write "$D" "$S" 0 && java5 record "$D" "$D.answers.json" 0
  elif [ "$MODE" = expire ]; then   # the oldest EXPIRE_FILES (3) commitlog files deleted by the broker's clean services
    java5 write "$D" "$S" 0 && java5 expire "$D" "${EXPIRE_FILES:-3}" && java5 record "$D" "$D.answers.json" 0
  else
    java5 write "$D" "$S" "${CRASHMODE:-1}" || true
    cp -a --sparse=always "$D" "$D.java"
    java5 record "$D.java" "$D.answers.json" 1 && rm -rf "$D.java"
  fi
  $PY "$HERE/compare.py" "$D" "$D.answers.json" "$D" || true
done
