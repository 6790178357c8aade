import java.io.File;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.BooleanSupplier;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBatch;
import org.apache.rocketmq.logging.InternalLoggerFactory;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.GetMessageStatus;
import org.apache.rocketmq.store.MessageExtBrokerInner;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.index.IndexService;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/**
 * The Java side of rmqstore's bench (bench/java_side.py): RocketMQ's own DefaultMessageStore,
 * from the jars of a RocketMQ distribution, running the workloads the Python side runs, by the
 * same rules (bench/README.md, "the rules"). One JSON object per line on stdout (the Python
 * side reads the lines that start with '{').
 *
 * Every timed figure comes from steady(): passes until three consecutive ones agree within 5%
 * (or WARM seconds), then passes timed until MIN seconds (and, for appends, MIN messages).
 *
 *   append DIR BATCH MINMSGS MINSECS WARMSECS [ROLL]  a scratch store first (this JVM has written a
 *                             store before); then DIR, warmed until it has rolled a commitlog
 *                             file (ROLL 1, the default; 0 for tests), then the timed window. Messages are built (and batches encoded)
 *                             inside the clock; BATCH 32 adds a window of pre-encoded batches.
 *                             Every pass waits until the ConsumeQueue and the index are dispatched.
 *   walk DIR MINSECS WARMSECS   every queue in 32-message pages (getMessage), then with
 *                             MessageDecoder.decode per message, every field read
 *   query DIR KEYFILE MINSECS WARMSECS  IndexService.queryOffset and queryMessage of every key
 *   active DIR KEYFILE MINSECS WARMSECS  a started store: one message written (the active
 *                             index file gets an entry), then the offsets queries
 *   mkstore DIR N ENTRIES SEED NQ KEYFILE  a store for key queries: N messages, random keys,
 *                             ENTRIES index entries in all (UNIQ_KEYs + keys); NQ query keys,
 *                             each a distinct message spread over the log, half KEYS, half UNIQ_KEY
 */
public class StoreBench {
    static final String TOPIC = "BenchTopic";
    static final String TAG = "TagA";
    static final int QUEUES = 4;
    static final int BODY = 1024;
    static final int DISTINCT_BODIES = 32;
    static final int PASS_MESSAGES = 65_536;   // one append pass
    static final int SCRATCH_MESSAGES = 40_960;  // the store this JVM writes before DIR
    static final int POOL_BATCHES = 1024;        // pre-encoded batches, cycled
    static final InetSocketAddress BORN = new InetSocketAddress("127.0.0.1", 0);
    static final InetSocketAddress STORE_HOST = new InetSocketAddress("127.0.0.1", 10911);
    static final byte[][] BODIES = bodies();

    public static void main(String[] a) throws Exception {
        // RocketMQ's own inner logger has no appender: nothing on stdout but our JSON lines
        InternalLoggerFactory.setCurrentLoggerType(InternalLoggerFactory.LOGGER_INNER);
        int status = 1;
        try {
            switch (a[0]) {
                case "append": append(a[1], Integer.parseInt(a[2]), Long.parseLong(a[3]), d(a[4]), d(a[5]),
                    a.length < 7 || a[6].equals("1")); break;
                case "walk": walk(a[1], d(a[2]), d(a[3])); break;
                case "query": query(a[1], a[2], d(a[3]), d(a[4]), false); break;
                case "active": query(a[1], a[2], d(a[3]), d(a[4]), true); break;
                case "mkstore": mkstore(a[1], Integer.parseInt(a[2]), Long.parseLong(a[3]), Long.parseLong(a[4]),
                    Integer.parseInt(a[5]), a[6]); break;
                default: throw new IllegalArgumentException("unknown workload " + a[0]);
            }
            status = 0;
        } catch (Throwable t) {
            t.printStackTrace();
        } finally {
            System.exit(status);  // the store's service threads are not all daemons: never hang
        }
    }

    static double d(String s) { return Double.parseDouble(s); }

    static DefaultMessageStore open(String dir, boolean start) throws Exception {
        MessageStoreConfig cfg = new MessageStoreConfig();  // default file sizes, ASYNC_FLUSH
        cfg.setStorePathRootDir(dir);
        cfg.setStorePathCommitLog(dir + File.separator + "commitlog");
        cfg.setHaListenPort(0);  // no fixed port: HAService listens once started
        DefaultMessageStore s = new DefaultMessageStore(cfg, new BrokerStatsManager("DefaultCluster", true),
            null, new BrokerConfig());
        if (!s.load()) throw new IllegalStateException("load failed: " + dir);
        if (start) s.start();
        return s;
    }

    static byte[][] bodies() {
        Random r = new Random(7);
        byte[][] out = new byte[DISTINCT_BODIES][BODY];
        for (byte[] b : out) r.nextBytes(b);
        return out;
    }

    // ---- the rule: warm until steady, then a timed window ------------------------------------

    /** One pass of a workload: {nanoseconds, messages or queries, bytes, a checksum}. */
    interface Pass { long[] run() throws Exception; }

    /** Passes until three consecutive rates agree within 5% (or warmSecs) and `ready` holds, then
     * passes timed until minSecs and minCount. Returns {ns, count, bytes, acc, warmNs, warmPasses,
     * timedPasses}. */
    static long[] steady(Pass p, double minSecs, long minCount, double warmSecs, BooleanSupplier ready) throws Exception {
        long t0 = System.nanoTime();
        List<Double> rates = new ArrayList<>();
        while (true) {
            long[] r = p.run();
            rates.add(r[1] / (double) Math.max(1, r[0]));
            boolean steadyNow = false;
            int k = rates.size();
            if (k >= 3) {
                double lo = Math.min(rates.get(k - 1), Math.min(rates.get(k - 2), rates.get(k - 3)));
                double hi = Math.max(rates.get(k - 1), Math.max(rates.get(k - 2), rates.get(k - 3)));
                steadyNow = hi > 0 && (hi - lo) / hi <= 0.05;
            }
            if ((steadyNow || System.nanoTime() - t0 >= warmSecs * 1e9) && ready.getAsBoolean()) break;
        }
        long warmNs = System.nanoTime() - t0;
        long ns = 0, n = 0, bytes = 0, acc = 0, passes = 0;
        while (ns < minSecs * 1e9 || n < minCount) {
            long[] r = p.run();
            ns += r[0]; n += r[1]; bytes += r[2]; acc += r[3]; passes++;
        }
        return new long[] {ns, n, bytes, acc, warmNs, rates.size(), passes};
    }

    static Object[] fields(long[] r, String countName) {
        return new Object[] {"seconds", r[0] / 1e9, countName, r[1], "bytes", r[2], "warmSeconds", r[4] / 1e9,
            "warmPasses", r[5], "timedPasses", r[6]};
    }

    static Object[] cat(Object[] a, Object... b) {
        Object[] o = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, o, a.length, b.length);
        return o;
    }

    // ---- messages, built as a broker builds them from send requests --------------------------

    static int seq;
    static final int PID = new Random().nextInt(0x10000);
    static final char[] HEX = "0123456789ABCDEF".toCharArray();

    /** A producer's 32-hex-digit id (IPv4 loopback, a process tag, time, counter): the length rmqstore
     * writes. Written digit by digit as MessageClientIDSetter does (no String.format in the clock). */
    static String uniqId() {
        char[] c = new char[32];
        hex(c, 0, 0x7F000001L, 8);
        hex(c, 8, PID, 4);
        hex(c, 12, System.currentTimeMillis() / 1000, 8);
        hex(c, 20, ++seq, 12);
        return new String(c);
    }

    static void hex(char[] c, int at, long v, int digits) {
        for (int i = digits - 1; i >= 0; i--, v >>>= 4) c[at + i] = HEX[(int) (v & 15)];
    }

    /** prefix + i in `digits` decimal digits, zero-padded (no String.format in the clock). */
    static String numbered(char prefix, long i, int digits) {
        char[] c = new char[digits + 1];
        c[0] = prefix;
        for (int k = digits; k >= 1; k--, i /= 10) c[k] = (char) ('0' + i % 10);
        return new String(c);
    }

    static Map<String, String> props(String keys) {
        Map<String, String> p = new LinkedHashMap<>();  // the order rmqstore writes them in
        p.put("TAGS", TAG);
        if (keys != null) p.put("KEYS", keys);
        p.put("UNIQ_KEY", uniqId());  // a producer sets it
        return p;
    }

    /** One message as the broker makes it from a send request. */
    static MessageExtBrokerInner single(byte[] body, int queue, String keys) {
        MessageExtBrokerInner m = new MessageExtBrokerInner();
        m.setTopic(TOPIC);
        m.setBody(body);
        m.setQueueId(queue);
        Map<String, String> p = props(keys);
        p.put("CLUSTER", "DefaultCluster");  // the broker adds it
        MessageAccessor.setProperties(m, p);
        m.setPropertiesString(MessageDecoder.messageProperties2String(p));
        m.setTagsCode(MessageExtBrokerInner.tagsString2tagsCode(TAG));
        m.setBornTimestamp(System.currentTimeMillis());
        m.setBornHost(BORN);
        m.setStoreHost(STORE_HOST);
        return m;
    }

    /** A batch of `size` as the broker receives it: the client's encoding of the messages. */
    static MessageExtBatch batch(long b, int size) {
        List<Message> msgs = new ArrayList<>(size);
        String key = numbered('b', b, 9);
        for (int j = 0; j < size; j++) {
            Message m = new Message();
            m.setTopic(TOPIC);
            m.setBody(BODIES[(int) ((b * size + j) % DISTINCT_BODIES)]);
            MessageAccessor.setProperties(m, props(key));
            msgs.add(m);
        }
        MessageExtBatch x = new MessageExtBatch();
        x.setTopic(TOPIC);
        x.setQueueId((int) (b % QUEUES));
        x.setBody(MessageDecoder.encodeMessages(msgs));
        MessageAccessor.putProperty(x, "CLUSTER", "DefaultCluster");
        x.setBornTimestamp(System.currentTimeMillis());
        x.setBornHost(BORN);
        x.setStoreHost(STORE_HOST);
        return x;
    }

    static void check(PutMessageResult r) {
        if (r == null || !r.isOk()) throw new IllegalStateException("put failed: " + r);
    }

    static void dispatched(DefaultMessageStore s) throws InterruptedException {
        while (s.dispatchBehindBytes() > 0) Thread.sleep(0, 200_000);  // CQ + index dispatched
    }

    // ---- append ----------------------------------------------------------------------------

    static long next;  // messages (or batches) put so far: keys and queues go on from it

    /** One pass: `count` messages put (built inside the clock; batch > 1: `count / batch`
     * batches encoded inside the clock, or taken from `pool`), then until dispatched. */
    static long[] appendPass(DefaultMessageStore s, int count, int batch, List<MessageExtBatch> pool) throws Exception {
        long before = s.getMaxPhyOffset();
        long t = System.nanoTime();
        if (batch == 1) {
            for (int i = 0; i < count; i++, next++) {
                check(s.putMessage(single(BODIES[(int) (next % DISTINCT_BODIES)], (int) (next % QUEUES),
                    numbered('k', next, 9))));
            }
        } else {
            for (int i = 0; i < count / batch; i++, next++) {
                check(s.putMessages(pool == null ? batch(next, batch) : pool.get((int) (next % pool.size()))));
            }
        }
        dispatched(s);
        return new long[] {System.nanoTime() - t, count / batch * batch, s.getMaxPhyOffset() - before, 0};
    }

    static void append(String dir, int batch, long minMessages, double minSecs, double warmSecs, boolean roll)
            throws Exception {
        DefaultMessageStore w = open(dir + "-scratch", true);   // this JVM writes a store before DIR
        appendPass(w, SCRATCH_MESSAGES, batch, null);
        w.shutdown();
        w.destroy();
        deleteTree(new File(dir + "-scratch"));
        DefaultMessageStore s = open(dir, true);
        long fileSize = s.getMessageStoreConfig().getMappedFileSizeCommitLog();
        BooleanSupplier rolled = () -> !roll || s.getMaxPhyOffset() > fileSize;
        long[] r = steady(() -> appendPass(s, PASS_MESSAGES, batch, null), minSecs, minMessages, warmSecs, rolled);
        Object[] out = cat(fields(r, "messages"), "batch", batch, "encodedInClock", 1, "storeBytesBefore",
            s.getMaxPhyOffset() - r[2]);
        if (batch > 1) {   // the extra figure: batches encoded before the clock, as the old ruler timed them
            List<MessageExtBatch> pool = new ArrayList<>(POOL_BATCHES);
            for (int b = 0; b < POOL_BATCHES; b++) pool.add(batch(b, batch));
            long[] p = steady(() -> appendPass(s, PASS_MESSAGES, batch, pool), minSecs, minMessages, warmSecs, () -> true);
            out = cat(out, "preEncodedSeconds", p[0] / 1e9, "preEncodedMessages", p[1]);
        }
        s.shutdown();
        emit("append", out);
    }

    // ---- walk --------------------------------------------------------------------------------

    /** mode 0: pages only; 1: MessageDecoder.decode per message, every field it fills read. */
    static long[] walkOnce(DefaultMessageStore s, int mode) {
        long n = 0, bytes = 0, acc = 0;
        long t = System.nanoTime();
        for (int q = 0; q < QUEUES; q++) {
            long off = s.getMinOffsetInQueue(TOPIC, q);
            while (true) {
                GetMessageResult r = s.getMessage("bench", TOPIC, q, off, 32, null);
                if (r == null || r.getStatus() != GetMessageStatus.FOUND) {
                    if (r != null) r.release();
                    break;
                }
                if (mode == 1) {
                    for (ByteBuffer bb : r.getMessageBufferList()) {
                        MessageExt m = MessageDecoder.decode(bb, true, true);
                        acc += readAll(m);
                    }
                }
                n += r.getMessageCount();
                bytes += r.getBufferTotalSize();
                off = r.getNextBeginOffset();
                r.release();
            }
        }
        return new long[] {System.nanoTime() - t, n, bytes, acc};
    }

    /** Every field MessageDecoder.decode fills, read (folded into a checksum the JIT must keep). */
    static long readAll(MessageExt m) {
        return m.getStoreSize() + m.getBodyCRC() + m.getQueueId() + m.getFlag() + m.getQueueOffset()
            + m.getCommitLogOffset() + m.getSysFlag() + m.getBornTimestamp() + m.getBornHost().hashCode()
            + m.getStoreTimestamp() + m.getStoreHost().hashCode() + m.getReconsumeTimes()
            + m.getPreparedTransactionOffset() + m.getBody().length + m.getTopic().length()
            + m.getProperties().size() + m.getMsgId().length();
    }

    static void walk(String dir, double minSecs, double warmSecs) throws Exception {
        DefaultMessageStore s = open(dir, true);  // getMessage answers only a started store
        String[] names = {"page", "decode"};
        for (int mode = 0; mode < 2; mode++) {
            final int m = mode;
            long[] r = steady(() -> walkOnce(s, m), minSecs, 0, warmSecs, () -> true);
            emit(names[mode], cat(fields(r, "messages"), "checksum", r[3]));
        }
        s.shutdown();
    }

    // ---- key queries -------------------------------------------------------------------------

    static void query(String dir, String keyFile, double minSecs, double warmSecs, boolean active) throws Exception {
        DefaultMessageStore s = open(dir, active);  // query: loaded, not started (nothing written)
        Field f = DefaultMessageStore.class.getDeclaredField("indexService");
        f.setAccessible(true);
        IndexService idx = (IndexService) f.get(s);
        List<String> keys = Files.readAllLines(Paths.get(keyFile), StandardCharsets.UTF_8);
        if (active) {   // the active index file gets an entry, as on a broker taking messages
            check(s.putMessage(single(BODIES[0], 0, numbered('w', System.nanoTime() % 1_000_000_000L, 9))));
            dispatched(s);
        }
        for (String mode : active ? new String[] {"offsets"} : new String[] {"offsets", "messages"}) {
            long[] r = steady(() -> {
                long t = System.nanoTime();
                long h = timeQueries(s, idx, keys, mode);
                return new long[] {System.nanoTime() - t, keys.size(), 0, h};
            }, minSecs, 0, warmSecs, () -> true);
            // latencies: a pass with a clock read around each query (kept apart from the window,
            // where a clock read per query would be counted as query time)
            long[] lat = new long[keys.size()];
            long latHits = 0;
            for (int i = 0; i < lat.length; i++) {
                long a = System.nanoTime();
                latHits += one(s, idx, keys.get(i), mode);
                lat[i] = System.nanoTime() - a;
            }
            Arrays.sort(lat);
            emit((active ? "active-" : "query-") + mode, cat(fields(r, "queries"), "hits", latHits,
                "hitsInWindow", r[3], "p50Us", lat[lat.length / 2] / 1e3, "p99Us", lat[(int) (lat.length * 0.99)] / 1e3));
        }
        s.shutdown();
    }

    static long timeQueries(DefaultMessageStore s, IndexService idx, List<String> keys, String mode) {
        long h = 0;
        for (String k : keys) h += one(s, idx, k, mode);
        return h;
    }

    static long one(DefaultMessageStore s, IndexService idx, String key, String mode) {
        if (mode.equals("offsets")) return idx.queryOffset(TOPIC, key, 64, 0, Long.MAX_VALUE).getPhyOffsets().size();
        QueryMessageResult r = s.queryMessage(TOPIC, key, 64, 0, Long.MAX_VALUE);
        int n = r.getMessageBufferList().size();
        r.release();
        return n;
    }

    // ---- the key-query stores ------------------------------------------------------------------

    /** N messages of 1 KiB with random keys: message i carries keysOf(i) keys (the ENTRIES - N
     * keys spread evenly) and a UNIQ_KEY; NQ query keys to KEYFILE, one per chosen message,
     * the chosen messages spread over the whole log, in random order. */
    static void mkstore(String dir, int n, long entries, long seed, int nq, String keyFile) throws Exception {
        Random rnd = new Random(seed);
        long extra = entries - n;   // keys beyond the UNIQ_KEYs
        int[] pick = new int[nq];    // message j * n / nq + jitter, one per stride
        for (int j = 0; j < nq; j++) {
            long lo = (long) j * n / nq, hi = (long) (j + 1) * n / nq;
            pick[j] = (int) (lo + (long) (rnd.nextDouble() * (hi - lo)));
        }
        String[] chosen = new String[nq];
        DefaultMessageStore s = open(dir, true);
        int j = 0;
        long t = System.nanoTime();
        char[] kc = new char[16];
        for (int i = 0; i < n; i++) {
            int k = (int) ((i + 1) * extra / n - i * extra / n);
            StringBuilder keys = new StringBuilder(k * 17);
            for (int x = 0; x < k; x++) {
                hex(kc, 0, rnd.nextLong(), 16);
                if (x > 0) keys.append(' ');
                keys.append(kc);
            }
            MessageExtBrokerInner m = single(BODIES[i % DISTINCT_BODIES], i % QUEUES, k > 0 ? keys.toString() : null);
            if (j < nq && pick[j] == i) {
                chosen[j] = (k > 0 && j % 2 == 0) ? keys.substring(0, 16) : m.getProperty("UNIQ_KEY");
                j++;
            }
            check(s.putMessage(m));
        }
        dispatched(s);
        long ns = System.nanoTime() - t;
        long phy = s.getMaxPhyOffset();
        s.shutdown();
        List<String> order = new ArrayList<>(Arrays.asList(chosen));
        java.util.Collections.shuffle(order, rnd);
        Files.write(Paths.get(keyFile), order, StandardCharsets.UTF_8);
        emit("mkstore", "messages", n, "entries", entries, "bytes", phy, "seconds", ns / 1e9, "queryKeys", nq);
    }

    static void emit(String workload, Object... kv) {
        StringBuilder sb = new StringBuilder("{\"workload\": \"").append(workload).append('"');
        sb.append(", \"rocketmq\": \"").append(MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION)).append('"');
        sb.append(", \"java\": \"").append(System.getProperty("java.version")).append('"');
        for (int i = 0; i < kv.length; i += 2) {
            Object v = kv[i + 1];
            sb.append(", \"").append(kv[i]).append("\": ");
            sb.append(v instanceof String ? "\"" + v + "\"" : String.valueOf(v));
        }
        System.out.println(sb.append('}'));
        System.out.flush();
    }

    static void deleteTree(File f) {
        File[] kids = f.listFiles();
        if (kids != null) for (File k : kids) deleteTree(k);
        f.delete();
    }
}
