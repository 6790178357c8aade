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
 * from the jars of a RocketMQ distribution, running the workloads the Python side runs.
 * One JSON object per line on stdout (the Python side reads the lines that start with '{').
 *
 *   append DIR N BATCH WARM   N messages into a fresh store at DIR (BATCH 1: putMessage,
 *                             32: putMessages of pre-encoded batches), timed until the
 *                             ConsumeQueue and the index are dispatched; WARM messages into a
 *                             scratch store first (the JIT)
 *   walk DIR REPS             every queue of the bench topic in 32-message pages (getMessage),
 *                             then the same walk with MessageDecoder.decode per message
 *   query DIR KEYFILE         IndexService.queryOffset and queryMessage for every key of KEYFILE
 *                             (one per line); latencies per query
 * Reads and queries are warmed with WARM_CALLS calls first, whatever the timed count.
 */
public class StoreBench {
    static final String TOPIC = "BenchTopic";
    static final String TAG = "TagA";
    static final int QUEUES = 4;
    static final int BODY = 1024;
    static final int DISTINCT_BODIES = 32;
    static final int WARM_CALLS = 200_000;  // calls before timing, whatever the timed count: C2 compiles
    static final InetSocketAddress BORN = new InetSocketAddress("127.0.0.1", 0);
    static final InetSocketAddress STORE_HOST = new InetSocketAddress("127.0.0.1", 10911);

    public static void main(String[] a) throws Exception {
        // RocketMQ's own inner logger has no appender: nothing on stdout but our JSON lines
        InternalLoggerFactory.setCurrentLoggerType(InternalLoggerFactory.LOGGER_INNER);
        int status = 1;
        try {
            switch (a[0]) {
                case "append": append(a[1], Integer.parseInt(a[2]), Integer.parseInt(a[3]), Integer.parseInt(a[4])); break;
                case "walk": walk(a[1], Integer.parseInt(a[2])); break;
                case "query": query(a[1], a[2]); break;
                default: throw new IllegalArgumentException("unknown workload " + a[0]);
            }
            status = 0;
        } catch (Throwable t) {
            t.printStackTrace();
        } finally {
            System.exit(status);  // the store's service threads are not all daemons: never hang
        }
    }

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

    static Map<String, String> props(String key) {
        Map<String, String> p = new LinkedHashMap<>();  // the order rmqstore writes them in
        p.put("TAGS", TAG);
        p.put("KEYS", key);
        p.put("UNIQ_KEY", uniqId());  // a producer sets it
        return p;
    }

    static int seq;
    static final int PID = new Random().nextInt(0x10000);

    /** A producer's 32-hex-digit id (IPv4 loopback, a process tag, time, counter): the length rmqstore
     * writes. MessageClientIDSetter would use this host's address, 56 digits when IPv6. */
    static String uniqId() {
        return String.format("7F000001%04X%08X%012X", PID,
            (int) (System.currentTimeMillis() / 1000), ++seq & 0xFFFFFFFFFFFFL);
    }

    /** The messages a broker would have decoded from N send requests, built before timing. */
    static List<MessageExtBrokerInner> singles(int n) {
        byte[][] bodies = bodies();
        List<MessageExtBrokerInner> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            MessageExtBrokerInner m = new MessageExtBrokerInner();
            m.setTopic(TOPIC);
            m.setBody(bodies[i % DISTINCT_BODIES]);
            m.setQueueId(i % QUEUES);
            Map<String, String> p = props(String.format("k%09d", i));
            p.put("CLUSTER", "DefaultCluster");  // the broker adds it
            MessageAccessor.setProperties(m, p);
            m.setPropertiesString(MessageDecoder.messageProperties2String(p));
            m.setTagsCode(MessageExtBrokerInner.tagsString2tagsCode(TAG));
            m.setBornTimestamp(System.currentTimeMillis());
            m.setBornHost(BORN);
            m.setStoreHost(STORE_HOST);
            out.add(m);
        }
        return out;
    }

    /** Batches of `size` as the broker receives them: the client's encoding of the messages. */
    static List<MessageExtBatch> batches(int count, int size) {
        byte[][] bodies = bodies();
        List<MessageExtBatch> out = new ArrayList<>(count);
        for (int b = 0; b < count; b++) {
            List<Message> msgs = new ArrayList<>(size);
            String key = String.format("b%09d", b);
            for (int j = 0; j < size; j++) {
                Message m = new Message();
                m.setTopic(TOPIC);
                m.setBody(bodies[(b * size + j) % DISTINCT_BODIES]);
                MessageAccessor.setProperties(m, props(key));
                msgs.add(m);
            }
            MessageExtBatch x = new MessageExtBatch();
            x.setTopic(TOPIC);
            x.setQueueId(b % QUEUES);
            x.setBody(MessageDecoder.encodeMessages(msgs));
            MessageAccessor.putProperty(x, "CLUSTER", "DefaultCluster");
            x.setBornTimestamp(System.currentTimeMillis());
            x.setBornHost(BORN);
            x.setStoreHost(STORE_HOST);
            out.add(x);
        }
        return out;
    }

    static long[] putAll(DefaultMessageStore s, int n, int batch) throws Exception {
        List<MessageExtBrokerInner> ones = batch == 1 ? singles(n) : null;
        List<MessageExtBatch> many = batch == 1 ? null : batches(n / batch, batch);
        System.gc();
        long t = System.nanoTime();
        if (ones != null) {
            for (MessageExtBrokerInner m : ones) check(s.putMessage(m));
        } else {
            for (MessageExtBatch m : many) check(s.putMessages(m));
        }
        long putNs = System.nanoTime() - t;
        while (s.dispatchBehindBytes() > 0) Thread.sleep(0, 200_000);  // CQ + index dispatched
        long ns = System.nanoTime() - t;
        long msgs = 0;
        for (int q = 0; q < QUEUES; q++) msgs += s.getMaxOffsetInQueue(TOPIC, q);
        return new long[] {ns, msgs, s.getMaxPhyOffset(), putNs};
    }

    static void check(PutMessageResult r) {
        if (r == null || !r.isOk()) throw new IllegalStateException("put failed: " + r);
    }

    static void append(String dir, int n, int batch, int warm) throws Exception {
        if (warm > 0) {
            DefaultMessageStore w = open(dir + "-warm", true);
            putAll(w, Math.max(batch, warm / batch * batch), batch);
            w.shutdown();
            w.destroy();
            deleteTree(new File(dir + "-warm"));
        }
        DefaultMessageStore s = open(dir, true);
        long[] r = putAll(s, n, batch);
        s.shutdown();
        emit("append", "batch", batch, "seconds", r[0] / 1e9, "messages", r[1], "bytes", r[2], "warmMessages", warm,
            "putsReturnedSeconds", r[3] / 1e9);
    }

    static long[] walkOnce(DefaultMessageStore s, boolean decode) {
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
                if (decode) {
                    for (ByteBuffer bb : r.getMessageBufferList()) {
                        MessageExt m = MessageDecoder.decode(bb, true, true);
                        acc += m.getStoreTimestamp() + m.getBody().length + m.getQueueOffset();
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

    static void walk(String dir, int reps) throws Exception {
        DefaultMessageStore s = open(dir, true);
        for (boolean decode : new boolean[] {false, true}) {
            long warmed = 0;  // warm (JIT, page cache): at least two passes and WARM_CALLS messages
            for (int i = 0; i < 2 || warmed < WARM_CALLS; i++) warmed += walkOnce(s, decode)[1];
            long[] best = null;
            for (int i = 0; i < reps; i++) {
                long[] r = walkOnce(s, decode);
                if (best == null || r[0] < best[0]) best = r;
            }
            emit(decode ? "decode" : "page", "seconds", best[0] / 1e9, "messages", best[1], "bytes", best[2]);
        }
        s.shutdown();
    }

    static void query(String dir, String keyFile) throws Exception {
        DefaultMessageStore s = open(dir, false);  // loaded, not started: nothing is written
        Field f = DefaultMessageStore.class.getDeclaredField("indexService");
        f.setAccessible(true);
        IndexService idx = (IndexService) f.get(s);
        List<String> keys = Files.readAllLines(Paths.get(keyFile), StandardCharsets.UTF_8);
        for (String mode : new String[] {"offsets", "messages"}) {
            for (long warmed = 0; warmed < WARM_CALLS; warmed += keys.size()) timeQueries(s, idx, keys, mode);  // warm
            // throughput: one clock read around the whole pass (a clock read per query would be
            // counted as query time); latencies: a second pass with a clock read around each query
            long t = System.nanoTime();
            long hits = timeQueries(s, idx, keys, mode);
            long ns = System.nanoTime() - t;
            long[] lat = new long[keys.size()];
            long latHits = 0;   // used (emitted), so the JIT keeps every call
            for (int i = 0; i < lat.length; i++) {
                long a = System.nanoTime();
                latHits += one(s, idx, keys.get(i), mode);
                lat[i] = System.nanoTime() - a;
            }
            Arrays.sort(lat);
            emit("query-" + mode, "seconds", ns / 1e9, "queries", lat.length, "hits", hits, "latencyPassHits", latHits,
                "p50Us", lat[lat.length / 2] / 1e3, "p99Us", lat[(int) (lat.length * 0.99)] / 1e3);
        }
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
