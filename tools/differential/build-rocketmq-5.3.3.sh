#!/bin/bash
# Build RocketMQ 5.3.3's common, remoting and store jars offline, for the differential runs only.
# usage: tools/differential/build-rocketmq-5.3.3.sh GIT_DIR DEPS_DIR COMPILE_ONLY_DIR OUT_DIR
#   GIT_DIR           a clone (or bare mirror) of apache/rocketmq holding the tag rocketmq-all-5.3.3
#   DEPS_DIR          the dependency jars README.md lists (they are copied into OUT_DIR)
#   COMPILE_ONLY_DIR  jars needed only to compile (netty-codec-haproxy for remoting's server)
# One javac run over the three modules' src/main/java, five files left out and six shims added
# (rocketmq-5.3.3-shims/, README.md says why each).
set -e
GIT=$1; DEPS=$2; CONLY=$3; OUT=$4
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(mktemp -d); trap 'rm -rf "$B"' EXIT
git --git-dir="$GIT" archive --format=tar rocketmq-all-5.3.3 common/src/main remoting/src/main store/src/main | tar -x -C "$B"
find "$B" -name '*.java' \
  | grep -v -e '/common/logging/JoranConfiguratorExt.java$' -e '/common/logging/DefaultJoranConfiguratorExt.java$' \
            -e '/common/constant/GrpcConstants.java$' -e '/common/utils/FastJsonSerializer.java$' \
            -e '/remoting/protocol/RequestHeaderRegistry.java$' > "$B/sources.txt"
find "$HERE/rocketmq-5.3.3-shims" -name '*.java' >> "$B/sources.txt"
mkdir -p "$B/classes" "$OUT"
javac -nowarn -encoding UTF-8 --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
  -cp "$(ls "$DEPS"/*.jar "$CONLY"/*.jar | tr '\n' ':')" -d "$B/classes" @"$B/sources.txt"
cd "$B/classes"
rm -rf com/alibaba/fastjson2   # the compile-only annotation shim is not shipped
jar --create --file "$OUT/rocketmq-common-5.3.3.jar" org/apache/rocketmq/common
jar --create --file "$OUT/rocketmq-remoting-5.3.3.jar" org/apache/rocketmq/remoting
jar --create --file "$OUT/rocketmq-store-5.3.3.jar" org/apache/rocketmq/store
jar --create --file "$OUT/rocketmq-533-local-shims.jar" org/apache/rocketmq/logging com/conversantmedia org/rocksdb
cp "$DEPS"/*.jar "$OUT/"
echo "built into $OUT"
