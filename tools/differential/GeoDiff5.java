import java.io.File;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.*;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBatch;
import org.apache.rocketmq.common.message.MessageExtBrokerInner;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.store.queue.RocksDBConsumeQueueStore;
import org.apache.rocketmq.store.timer.TimerCheckpoint;
import org.apache.rocketmq.store.timer.TimerMessageStore;
import org.apache.rocketmq.store.timer.TimerMetrics;
import org.apache.rocketmq.store.timer.TimerWheel;
import org.apache.rocketmq.store.timer.Slot;
import org.apache.rocketmq.store.*;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.index.IndexService;
import org.apache.rocketmq.store.kv.CompactionLog;
import org.apache.rocketmq.store.kv.CompactionStore;
import org.apache.rocketmq.store.index.QueryOffsetResult;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

/**
 * Differential harness: RocketMQ 5.3.3's DefaultMessageStore (RocksDBMessageStore for -Dkind=rocksdb) with
 * random geometry; -Dkind=plain|batchcq|lmq|rocksdb|timer|dledger|compaction (README.md). Overrides: -DclSize -DcqUnits -Dslots -DindexNum
 * -DnMsgs -DbcqUnits -DmaxBody -DtimerPrecision; -DlongTopics=true makes the first topic 128-254 chars (V2 records); -DmidFlush=true flushes the queue store 3/5 of the way (RocksDB: SSTs and a checkpoint).
 *   write DIR SEED CRASH     write a store (geometry from SEED); writes DIR/geo.json (config, topics, keys);
 *                            CRASH=1: Runtime.halt(0) after dispatch (abort left); 2: dispatch stopped before the
 *                            last ~80 puts (queues and index behind); 0: clean shutdown
 *   expire DIR N             the oldest N commitlog files aged, the broker's clean services run, clean shutdown
 *   record DIR OUT START     open (load; START=1 also start(), else only the shutdown flag is cleared so
 *                            getMessage answers) with DIR/geo.json's config; record answers to OUT; then
 *                            START=1: clean shutdown; START=0: halt (no byte written by the recorder)
 */
public class GeoDiff5 {
    static final InetSocketAddress BORN = new InetSocketAddress("127.0.0.1", 0);
    static final InetSocketAddress STORE_HOST = new InetSocketAddress("127.0.0.1", 10911);

    public static void main(String[] a) throws Exception {
        int status = 1;
        try {
            if (a[0].equals("write")) { crashFast = a[3].equals("2"); write(a[1], Long.parseLong(a[2]), !a[3].equals("0")); }
            else if (a[0].equals("record")) record(a[1], a[2], a[3].equals("1"));
            else if (a[0].equals("expire")) expire(a[1], Integer.parseInt(a[2]));
            status = 0;
        } catch (Throwable t) {
            t.printStackTrace();
        }
        Runtime.getRuntime().halt(status);
    }

    // ---------------------------------------------------------------- geometry
    static String kind = System.getProperty("kind", "plain");
    static boolean crcTail;
    static int bcqUnits;
    static List<String> batchTopics = new ArrayList<>();
    static List<String> lmqNames = new ArrayList<>();
    static boolean crashFast;
    static int timerPrecision, timerLogUnits, rollWindow;
    static TimerMessageStore timer;
    static List<String[]> timers = new ArrayList<>();   // uniqKey, TIMER_OUT_MS, real topic, real queue
    static boolean midFlush = Boolean.getBoolean("midFlush"), flushed, reputStopped;  // crash mode 2: the last puts are not waited for (CQ and index behind), halt at once
    static long clSize; static int cqUnits, slots, indexNum, nMsgs;
    static List<String> topics = new ArrayList<>();
    static List<Integer> queues = new ArrayList<>();
    // kind compaction: topics with cleanup.policy=COMPACTION, their KEYS pool, CompactionLog geometry, rounds of puts
    static List<String> compTopics = new ArrayList<>(), compKeys = new ArrayList<>();
    static int compLogSize, compCqSize, compRounds;
    static boolean compLastWait, compKeyless, recording;   // compKeyless: the first one's last queue gets no KEYS (no compaction log)
    static List<String> compSnapshots = new ArrayList<>();   // position-checkpoint after each round's wait

    static void geometry(Random r) {
        int[] odd = {100000, 8192, 12345, 65536 + 13, 262144, 99991};
        int pick = r.nextInt(3);
        clSize = pick == 0 ? odd[r.nextInt(odd.length)] : pick == 1 ? 8192 + r.nextInt(32768) : 8192 + r.nextInt(256 * 1024 - 8192);
        cqUnits = 5 + r.nextInt(396);
        int[] primes = {3, 7, 31, 101, 997, 1999, 2000, 5};
        slots = r.nextInt(2) == 0 ? primes[r.nextInt(primes.length)] : 3 + r.nextInt(1998);
        nMsgs = 300 + r.nextInt(2700);
        int entries = nMsgs * 3;
        int lo = Math.max(10, entries / 40);
        indexNum = Math.min(3000, lo + r.nextInt(Math.max(1, lo * 2)));
        clSize = Long.getLong("clSize", clSize); cqUnits = Integer.getInteger("cqUnits", cqUnits);
        slots = Integer.getInteger("slots", slots); indexNum = Integer.getInteger("indexNum", indexNum);
        nMsgs = Integer.getInteger("nMsgs", nMsgs);
        crcTail = r.nextInt(2) == 0;
        bcqUnits = Integer.getInteger("bcqUnits", 3 + r.nextInt(120));
        int nt = 2 + r.nextInt(3);
        String chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789%|-_";
        for (int t = 0; t < nt; t++) {
            int len = t == 0 ? 100 + r.nextInt(28) : 1 + r.nextInt(20);
            if (t == 0 && Boolean.getBoolean("longTopics")) len += 28 + r.nextInt(100);   // V2 records (topic > 127 bytes)
            StringBuilder sb = new StringBuilder();
            for (int i = 0; i < len; i++) sb.append(chars.charAt(r.nextInt(chars.length())));
            topics.add(sb.toString());
            queues.add(1 + r.nextInt(8));
        }
        if (kind.equals("batchcq")) { batchTopics.add(topics.get(1)); if (topics.size() > 2 && r.nextBoolean()) batchTopics.add(topics.get(2)); }
        if (kind.equals("timer")) {
            int[] precisions = {100, 200, 500, 1000, 1000, 300};   // setTimerPrecisionMs keeps 100/200/500/1000 (300 -> 200)
            timerPrecision = Integer.getInteger("timerPrecision", precisions[r.nextInt(precisions.length)]);
            timerLogUnits = 3 + r.nextInt(200);
            rollWindow = 2 + r.nextInt(40);
        }
        if (kind.equals("compaction")) compactionGeometry(r);
        if (kind.equals("lmq")) { String[] nm = {"%LMQ%a", "%LMQ%b-" + r.nextInt(100), "%LMQ%房间", "%LMQ%c%d"}; for (String x : nm) if (r.nextInt(4) != 0) lmqNames.add(x); if (lmqNames.isEmpty()) lmqNames.add("%LMQ%a"); }
    }

    /** 1 or 2 COMPACTION topics; compaction log files of 4 to 64 KiB (odd sizes too), compactionCq files of 3 to 120
     *  units (sometimes not a multiple of 46: CompactionLog rounds down); a pool of 5 to 60 KEYS (spaces, CJK, emoji). */
    static void compactionGeometry(Random r) {
        compTopics.add(topics.get(r.nextInt(topics.size())));
        String t2 = topics.get(r.nextInt(topics.size()));
        if (r.nextBoolean() && !compTopics.contains(t2)) compTopics.add(t2);
        int[] odd = {4096, 5000, 12345, 65536, 32768 + 7, 9999};
        compLogSize = r.nextBoolean() ? odd[r.nextInt(odd.length)] : 4096 + r.nextInt(61441);
        compCqSize = 46 * (r.nextBoolean() ? 3 + r.nextInt(8) : 3 + r.nextInt(118)) + (r.nextInt(4) == 0 ? 1 + r.nextInt(45) : 0);
        String[] forms = {"user-%d", "键-%d", "k %d", "emoji😀%d", "a b-%d"};
        for (int k = 0, n = 5 + r.nextInt(56); k < n; k++) compKeys.add(String.format(forms[r.nextInt(forms.length)], k));
        compRounds = 2 + r.nextInt(2);
        compLastWait = r.nextBoolean();
        compKeyless = r.nextInt(3) == 0;
    }

    /** CompactionLog.getCompactionLogSize: the log file size CompactionLog really uses. */
    static int compactionLogFileSize() {
        int cq = compCqSize / 46 * 46, n = compLogSize / cq, m = compLogSize % cq;
        return n < 5 ? cq * 5 : m > 0 && m < (cq >> 1) ? n * cq : (n + 1) * cq;
    }

    static MessageStoreConfig config(String dir) {
        MessageStoreConfig cfg = new MessageStoreConfig();
        cfg.setStorePathRootDir(dir);
        cfg.setStorePathCommitLog(dir + File.separator + "commitlog");
        cfg.setHaListenPort(0);
        cfg.setMappedFileSizeCommitLog((int) clSize);
        cfg.setMappedFileSizeConsumeQueue(20 * cqUnits);
        cfg.setMaxHashSlotNum(slots);
        cfg.setMaxIndexNum(indexNum);
        cfg.setMessageIndexEnable(true);
        cfg.setEnabledAppendPropCRC(crcTail);
        cfg.setMapperFileSizeBatchConsumeQueue(46 * bcqUnits);
        if (kind.equals("lmq")) { cfg.setEnableLmq(true); cfg.setEnableMultiDispatch(true); }
        if (rocks()) cfg.setStoreType("defaultRocksDB");
        if (kind.equals("compaction")) {   // as the shared fixture (README_COMPACTION.md): 1 s schedule, 1 thread
            cfg.setCompactionMappedFileSize(compLogSize);
            cfg.setCompactionCqMappedFileSize(compCqSize);
            cfg.setCompactionScheduleInternal(1000);
            cfg.setCompactionThreadNum(1);
        }
        if (kind.equals("dledger")) {   // a one-node DLedger group (DLedgerCommitLog starts its own DLedgerServer)
            cfg.setEnableDLegerCommitLog(true);
            cfg.setdLegerGroup("RaftNode00");
            cfg.setdLegerSelfId("n0");
            cfg.setdLegerPeers("n0-127.0.0.1:" + Integer.getInteger("dledgerPort", 40911));
        }
        if (kind.equals("timer")) {
            cfg.setTimerWheelEnable(true);
            cfg.setTimerPrecisionMs(timerPrecision);
            cfg.setMappedFileSizeTimerLog(52 * timerLogUnits);
            cfg.setTimerRollWindowSlot(rollWindow);
        }
        if (System.getProperty("role") != null) cfg.setBrokerRole(org.apache.rocketmq.store.config.BrokerRole.valueOf(System.getProperty("role")));  // SLAVE: no schedule delivery
        return cfg;
    }

    /** RocksDB consume queues: the rocksdb kind, or any kind with -Drocks=true (LMQ queues in RocksDB). */
    static boolean rocks() {
        return kind.equals("rocksdb") || Boolean.getBoolean("rocks");
    }

    static DefaultMessageStore open(String dir, boolean start) throws Exception {
        ConcurrentMap<String, TopicConfig> tct = new ConcurrentHashMap<>();
        for (int t = 0; t < topics.size(); t++) {
            TopicConfig tc = new TopicConfig(topics.get(t), queues.get(t), queues.get(t));
            if (batchTopics.contains(topics.get(t))) { Map<String, String> at = new HashMap<>(); at.put("queue.type", "BatchCQ"); tc.setAttributes(at); }
            if (compTopics.contains(topics.get(t))) { Map<String, String> at = new HashMap<>(); at.put("cleanup.policy", "COMPACTION"); tc.setAttributes(at); }
            tct.put(topics.get(t), tc);
        }
        DefaultMessageStore s = rocks()
            ? new RocksDBMessageStore(config(dir), new BrokerStatsManager("DefaultCluster", true), null, new BrokerConfig(), tct)
            : new DefaultMessageStore(config(dir), new BrokerStatsManager("DefaultCluster", true), null, new BrokerConfig(), tct);
        if (!s.load()) throw new IllegalStateException("load failed: " + dir);
        if (recording && !compTopics.isEmpty()) compactionStore(s).getCompactionSchedule().shutdownNow();   // no compaction (nor topic scan) while asked
        if (kind.equals("timer") && start) {   // as BrokerController wires it (the recorder reads the files instead)
            MessageStoreConfig cfg = s.getMessageStoreConfig();
            timerPrecision = cfg.getTimerPrecisionMs();   // as the setter kept it
            timer = new TimerMessageStore(s, cfg, new TimerCheckpoint(dir + "/config/timercheck"),
                new TimerMetrics(dir + "/config/timermetrics"), null);
            final DefaultMessageStore st = s;
            timer.registerEscapeBridgeHook(m -> st.putMessage(m));
            s.setTimerMessageStore(timer);
            if (!timer.load()) throw new IllegalStateException("timer load failed: " + dir);
        }
        if (start) {
            s.start();
            if (timer != null) { timer.start(); timer.setShouldRunningDequeue(true); }
            if (kind.equals("dledger")) {   // puts wait for the node to lead its group
                io.openmessaging.storage.dledger.DLedgerServer d =
                    ((org.apache.rocketmq.store.dledger.DLedgerCommitLog) s.getCommitLog()).getdLedgerServer();
                for (int k = 0; k < 600 && !d.getMemberState().isLeader(); k++) Thread.sleep(50);
                if (!d.getMemberState().isLeader()) throw new IllegalStateException("no DLedger leader");
            }
        }
        else {
            Field f = DefaultMessageStore.class.getDeclaredField("shutdown");
            f.setAccessible(true);
            f.setBoolean(s, false);
        }
        return s;
    }

    // ---------------------------------------------------------------- writing
    static int seq;
    static final char[] HEX = "0123456789ABCDEF".toCharArray();

    static String uniqId() {
        char[] c = new char[32];
        hex(c, 0, 0x7F000001L, 8);
        hex(c, 8, 0x1234, 4);
        hex(c, 12, System.currentTimeMillis() / 1000, 8);
        hex(c, 20, ++seq, 12);
        return new String(c);
    }

    static void hex(char[] c, int at, long v, int digits) {
        for (int i = digits - 1; i >= 0; i--, v >>>= 4) c[at + i] = HEX[(int) (v & 15)];
    }

    static final String[] SPECIAL = {"键-ü", "a.b:c/d", "x#y", "emoji😀k", "dup", "ĳ-Ω", "q?=&", "TAB\tX"};
    static List<String> allKeys = new ArrayList<>();
    static List<String> allUniq = new ArrayList<>();

    static Map<String, String> props(Random r, int i) {
        Map<String, String> p = new LinkedHashMap<>();
        if (r.nextInt(5) != 0) p.put("TAGS", r.nextInt(4) == 0 ? "标签" + r.nextInt(3) : "Tag" + r.nextInt(5));
        int nk = r.nextInt(4);
        if (nk > 0) {
            StringBuilder sb = new StringBuilder();
            for (int k = 0; k < nk; k++) {
                String key = r.nextInt(6) == 0 ? SPECIAL[r.nextInt(SPECIAL.length)] : "k" + r.nextInt(nMsgs);
                if (k > 0) sb.append(' ');
                sb.append(key);
                allKeys.add(key);
            }
            p.put("KEYS", sb.toString());
        }
        if (r.nextInt(10) != 0) {
            String u = uniqId();
            p.put("UNIQ_KEY", u);
            allUniq.add(u);
        }
        if (!lmqNames.isEmpty() && r.nextInt(6) != 0) {
            StringBuilder sb = new StringBuilder();
            for (String nm : lmqNames) if (r.nextBoolean()) { if (sb.length() > 0) sb.append(','); sb.append(nm); }
            if (sb.length() == 0) sb.append(lmqNames.get(0));
            p.put("INNER_MULTI_DISPATCH", sb.toString());
        }
        if (r.nextInt(3) == 0) p.put("color", "红" + r.nextInt(3));
        if (r.nextInt(4) == 0) p.put("n", String.valueOf(r.nextInt(1000)));
        return p;
    }

    static byte[] body(Random r) {
        int max = (int) Math.min(Integer.getInteger("maxBody", 4000), clSize - 1200);
        int len = r.nextInt(20) == 0 ? (int) Math.min(max, clSize / 2 + 1 + r.nextInt(200)) : 1 + r.nextInt(max);
        if (len > max) len = max;
        byte[] b = new byte[len];
        r.nextBytes(b);
        return b;
    }

    /** A compacted topic's message: a body that is sometimes empty (a tombstone), 1 byte, or (rarely, with no -DmaxBody or with -DbigBody=true)
     *  larger than a compaction log file; other topics' bodies as body(r). */
    static byte[] body(Random r, String topic) {
        if (!compTopics.contains(topic)) return body(r);
        int pick = r.nextInt(40), log = compactionLogFileSize();
        int max = (int) Math.min(Math.min(Integer.getInteger("maxBody", 4000), clSize - 1200), log / 3);
        int len = pick == 0 ? 0 : pick == 1 ? 1 : 1 + r.nextInt(Math.max(1, max));
        if (pick == 2 && (System.getProperty("maxBody") == null || Boolean.getBoolean("bigBody")) && log + 1600 < clSize) len = log + 10;
        byte[] b = new byte[len];
        r.nextBytes(b);
        return b;
    }

    /** A compacted topic's KEYS: one string of the pool (CompactionLog keeps the last message per whole KEYS string;
     *  the index splits it at spaces), or rarely none (CompactionLog.asyncPutMessage leaves such a message out). */
    static void compKey(Random r, String topic, int queue, Map<String, String> p) {
        if (!compTopics.contains(topic)) return;
        boolean keyless = compKeyless && topic.equals(compTopics.get(0)) && queue > 0 && queue == queues.get(topics.indexOf(topic)) - 1;
        if (r.nextInt(40) == 0 || keyless) { p.remove("KEYS"); return; }
        String k = compKeys.get(r.nextInt(compKeys.size()));
        p.put("KEYS", k);
        allKeys.addAll(Arrays.asList(k.split(" ")));
    }

    static CompactionStore compactionStore(DefaultMessageStore s) throws Exception {   // (DefaultMessageStore has no getter)
        Field f = DefaultMessageStore.class.getDeclaredField("compactionStore");
        f.setAccessible(true);
        return (CompactionStore) f.get(s);
    }

    /** After a round of puts: dispatched, then a wait long enough for each CompactionLog's doCompaction (scheduled
     *  every interval + 1000 + rand(interval) ms) to run at least once; the position checkpoint is kept for geo.json. */
    static void compactionWait(DefaultMessageStore s) throws Exception {
        if (!reputStopped) dispatched(s);   // (crash mode 2: dispatch stopped for good)
        Thread.sleep(3600);
        compSnapshots.add(offsetMap(compactionStore(s)));
    }

    static String offsetMap(CompactionStore cs) {
        StringBuilder b = new StringBuilder("{");
        for (Map.Entry<String, Long> e : new TreeMap<>(cs.getPositionMgr().getQueueOffsetMap()).entrySet())
            b.append(b.length() > 1 ? "," : "").append(js(e.getKey())).append(':').append(e.getValue());
        return b.append('}').toString();
    }

    static MessageExtBrokerInner single(Random r, String topic, int queue, int i) {
        MessageExtBrokerInner m = new MessageExtBrokerInner();
        m.setTopic(topic);
        m.setBody(body(r, topic));
        m.setQueueId(queue);
        Map<String, String> p = props(r, i);
        compKey(r, topic, queue, p);
        MessageAccessor.setProperties(m, p);
        m.setPropertiesString(MessageDecoder.messageProperties2String(p));
        m.setTagsCode(p.containsKey("TAGS") ? MessageExtBrokerInner.tagsString2tagsCode(p.get("TAGS")) : 0);
        m.setBornTimestamp(System.currentTimeMillis());
        m.setBornHost(BORN);
        m.setStoreHost(STORE_HOST);
        return m;
    }

    /** uniqEach: every inner message gets a UNIQ_KEY, as a producer's batch for a BatchCQ topic has. */
    static MessageExtBatch batch(Random r, String topic, int queue, int size, int i, boolean uniqEach) {
        List<Message> msgs = new ArrayList<>(size);
        for (int j = 0; j < size; j++) {
            Message m = new Message();
            m.setTopic(topic);
            m.setBody(body(r, topic));
            Map<String, String> p = props(r, i + j);
            compKey(r, topic, queue, p);
            if (uniqEach && !p.containsKey("UNIQ_KEY")) { String u = uniqId(); p.put("UNIQ_KEY", u); allUniq.add(u); }
            MessageAccessor.setProperties(m, p);
            msgs.add(m);
        }
        MessageExtBatch x = new MessageExtBatch();
        x.setTopic(topic);
        x.setQueueId(queue);
        x.setBody(MessageDecoder.encodeMessages(msgs));
        x.setBornTimestamp(System.currentTimeMillis());
        x.setBornHost(BORN);
        x.setStoreHost(STORE_HOST);
        return x;
    }

    static MessageExtBatch innerBatch(Random r, String topic, int queue, int size, int i) {
        // as 5.3.3's SendMessageProcessor.sendBatchMessage builds one for a BatchCQ topic
        MessageExtBatch x = batch(r, topic, queue, size, i, true);
        Map<String, String> outer = new HashMap<>();
        String bu = uniqId();
        outer.put("UNIQ_KEY", bu);
        allUniq.add(bu);
        if (r.nextInt(3) == 0) { String k = "bk" + r.nextInt(nMsgs); outer.put("KEYS", k); allKeys.add(k); }
        outer.put("CLUSTER", "DefaultCluster");
        outer.put("INNER_NUM", String.valueOf(MessageDecoder.countInnerMsgNum(ByteBuffer.wrap(x.getBody()))));
        MessageAccessor.setProperties(x, outer);
        x.setSysFlag(x.getSysFlag() | MessageSysFlag.NEED_UNWRAP_FLAG | MessageSysFlag.INNER_BATCH_FLAG);
        x.setInnerBatch(true);
        x.setPropertiesString(MessageDecoder.messageProperties2String(x.getProperties()));
        return x;
    }

    static void dispatched(DefaultMessageStore s) throws InterruptedException {
        while (s.dispatchBehindBytes() > 0) Thread.sleep(0, 200_000);
    }

    static void write(String dir, long seed, boolean crash) throws Exception {
        Random r = new Random(seed);
        geometry(r);
        new File(dir).mkdirs();
        DefaultMessageStore s = open(dir, true);
        int i = 0, puts = 0, batches = 0, round = 0;
        while (i < nMsgs) {
            int t = r.nextInt(topics.size());
            int q = r.nextInt(queues.get(t));
            PutMessageResult res;
            int nAdd;
            if (timer != null && r.nextInt(3) == 0) {
                res = s.putMessage(timerMessage(r, topics.get(t), q, i));
                nAdd = 1; puts++;
            } else if (batchTopics.contains(topics.get(t)) && r.nextInt(8) != 0) {
                int size = 1 + r.nextInt(12);
                MessageExtBatch b = innerBatch(r, topics.get(t), q, size, i);
                if (b.getBody().length + 300 * size > clSize - 1000) continue;
                res = s.putMessage(b);
                nAdd = size; batches++;
            } else if (!batchTopics.contains(topics.get(t)) && lmqNames.isEmpty() && r.nextInt(6) == 0) {
                // a batch must fit maxMessageSize and the file: keep it small relative to file size
                int size = 1 + r.nextInt(8);
                MessageExtBatch b = batch(r, topics.get(t), q, size, i, false);
                if (b.getBody().length + 200 * size > clSize - 1000) continue;
                res = s.putMessages(b);
                nAdd = size; batches++;
            } else {
                res = s.putMessage(single(r, topics.get(t), q, i));
                nAdd = 1; puts++;
            }
            if (res == null || !res.isOk()) throw new IllegalStateException("put failed: " + res + " at " + i);
            i += nAdd;
            if (!compTopics.isEmpty() && i >= (long) nMsgs * (round + 1) / compRounds && round < compRounds) {
                if (++round < compRounds || compLastWait) compactionWait(s);   // rounds of puts, each compacted
            }
            if (midFlush && !flushed && i > nMsgs * 3 / 5) {   // RocksDB queues: a memtable flush mid-way (SSTs, checkpoint)
                dispatched(s);
                s.getQueueStore().flush();
                flushed = true;
            }
            boolean fast = crashFast && i > nMsgs - 80;
            if (fast && !reputStopped) {   // the last puts are never dispatched: queues and index stay behind
                Field rf = DefaultMessageStore.class.getDeclaredField("reputMessageService");
                rf.setAccessible(true);
                ((org.apache.rocketmq.common.ServiceThread) rf.get(s)).makeStop();
                Thread.sleep(50);
                reputStopped = true;
            }
            if (!fast) dispatched(s);
            if (!fast && r.nextInt(3) == 0) Thread.sleep(1 + r.nextInt(3));
        }
        if (timer != null) Thread.sleep(6000);   // the short delays fire; the wheel is flushed every second
        long behind = s.dispatchBehindBytes();
        if (!crashFast) {
            dispatched(s);
            Thread.sleep(50);
            dispatched(s);
        }
        // geo.json: what the recorder needs to reopen and what to ask
        StringBuilder sb = new StringBuilder("{");
        kv(sb, "seed", seed).append(',');
        kv(sb, "crash", crash).append(',');
        kv(sb, "crashFast", crashFast).append(',');
        kv(sb, "dispatchBehindAtHalt", behind).append(',');
        kv(sb, "mappedFileSizeCommitLog", clSize).append(',');
        kv(sb, "mappedFileSizeConsumeQueue", 20 * cqUnits).append(',');
        kv(sb, "maxHashSlotNum", slots).append(',');
        kv(sb, "maxIndexNum", indexNum).append(',');
        kv(sb, "messages", nMsgs).append(',');
        kv(sb, "singlePuts", puts).append(',');
        kv(sb, "batches", batches).append(',');
        kv(sb, "maxPhyOffsetAtEnd", s.getMaxPhyOffset()).append(',');
        kv(sb, "kind", kind).append(',');
        kv(sb, "rocks", rocks()).append(',');
        kv(sb, "timerPrecisionMs", timerPrecision).append(',');
        kv(sb, "mappedFileSizeTimerLog", 52 * timerLogUnits).append(',');
        kv(sb, "timerRollWindowSlot", rollWindow).append(',');
        sb.append("\"timers\":[");
        for (int k = 0; k < timers.size(); k++) sb.append(k > 0 ? "," : "").append(jsonList(Arrays.asList(timers.get(k))));
        sb.append("],");
        kv(sb, "enabledAppendPropCRC", crcTail).append(',');
        kv(sb, "mapperFileSizeBatchConsumeQueue", 46 * bcqUnits).append(',');
        sb.append("\"batchTopics\":").append(jsonList(batchTopics)).append(',');
        sb.append("\"lmqNames\":").append(jsonList(lmqNames)).append(',');
        if (!compTopics.isEmpty()) {
            sb.append("\"compTopics\":").append(jsonList(compTopics)).append(',');
            kv(sb, "compactionMappedFileSize", compLogSize).append(',');
            kv(sb, "compactionCqMappedFileSize", compCqSize).append(',');
            kv(sb, "compactionLogFileSize", compactionLogFileSize()).append(',');
            sb.append("\"compactionKeys\":").append(jsonList(compKeys)).append(',');
            sb.append("\"positionAfterRounds\":").append(compSnapshots).append(',');
        }
        sb.append("\"topics\":").append(jsonList(topics)).append(',');
        sb.append("\"queues\":").append(queues).append(',');
        Set<String> ks = new LinkedHashSet<>(allKeys);
        sb.append("\"keys\":").append(jsonList(new ArrayList<>(ks))).append(',');
        sb.append("\"uniq\":").append(jsonList(allUniq)).append('}');
        Files.write(Paths.get(dir, "geo.json"), sb.toString().getBytes(StandardCharsets.UTF_8));
        if (crash) {
            System.out.println("{\"halt\":true}");
            System.out.flush();
            Runtime.getRuntime().halt(0);
        }
        if (timer != null) timer.shutdown();
        s.shutdown();
    }

    /** A message with TIMER_DELAY_MS / TIMER_DELAY_SEC / TIMER_DELIVER_MS as 5.3.3's HookUtils.transformTimerMessage
     *  turns it into a wheel-topic message: TIMER_OUT_MS rounded down to the precision (one precision earlier
     *  when exact), REAL_TOPIC, REAL_QID, topic rmq_sys_wheel_timer queue 0. */
    static MessageExtBrokerInner timerMessage(Random r, String topic, int queue, int i) {
        MessageExtBrokerInner m = single(r, topic, queue, i);
        Map<String, String> p = m.getProperties();
        if (!p.containsKey("UNIQ_KEY")) { String u = uniqId(); p.put("UNIQ_KEY", u); allUniq.add(u); }
        long now = System.currentTimeMillis(), deliver;
        int pick = r.nextInt(4);
        if (pick == 0) { long ms = 300 + r.nextInt(3500); p.put("TIMER_DELAY_MS", String.valueOf(ms)); deliver = now + ms; }
        else if (pick == 1) { long sec = 1 + r.nextInt(4); p.put("TIMER_DELAY_SEC", String.valueOf(sec)); deliver = now + sec * 1000; }
        else if (pick == 2) { long sec = 30 + r.nextInt(2 * 86400); p.put("TIMER_DELAY_SEC", String.valueOf(sec)); deliver = now + sec * 1000; }
        else { deliver = now + 60_000 + (long) (r.nextDouble() * 40 * 3600_000L); p.put("TIMER_DELIVER_MS", String.valueOf(deliver)); }
        deliver = deliver % timerPrecision == 0 ? deliver - timerPrecision : deliver / timerPrecision * timerPrecision;
        p.put("TIMER_OUT_MS", String.valueOf(deliver));
        p.put("REAL_TOPIC", topic);
        p.put("REAL_QID", String.valueOf(queue));
        MessageAccessor.setProperties(m, p);
        m.setPropertiesString(MessageDecoder.messageProperties2String(p));
        m.setTopic(TimerMessageStore.TIMER_TOPIC);
        m.setQueueId(0);
        timers.add(new String[] {p.get("UNIQ_KEY"), String.valueOf(deliver), topic, String.valueOf(queue)});
        return m;
    }

    /** What RocketMQ's timer files answer (read as its TimerCheckpoint and TimerWheel read them; the timer
     *  store itself is not loaded: its recovery would write) and, per timer message, whether a delivered copy
     *  is in its real topic (queryMessage by its UNIQ_KEY). */
    static void recordTimer(StringBuilder sb, DefaultMessageStore s, String dir, String geo) throws Exception {
        TimerCheckpoint cp = new TimerCheckpoint(dir + "/config/timercheck");
        TimerWheel wheel = new TimerWheel(dir + "/timerwheel", TimerMessageStore.TIMER_WHEEL_TTL_DAY * TimerMessageStore.DAY_SECS,
            timerPrecision);
        sb.append("\"timer\":{\"precisionMs\":").append(timerPrecision);
        sb.append(",\"checkpoint\":[").append(cp.getLastReadTimeMs()).append(',').append(cp.getLastTimerLogFlushPos())
            .append(',').append(cp.getLastTimerQueueOffset()).append(',').append(cp.getMasterTimerQueueOffset()).append(']');
        sb.append(",\"messages\":[");
        boolean f = true;
        for (String[] t : timers) {
            if (!f) sb.append(',');
            f = false;
            QueryMessageResult qr = s.queryMessage(t[2], t[0], 64, 0, Long.MAX_VALUE);
            boolean delivered = false;
            for (ByteBuffer bb : qr.getMessageBufferList()) delivered |= MessageDecoder.decode(bb.slice(), true, false).getTopic().equals(t[2]);
            qr.release();
            long out = Long.parseLong(t[1]);
            Slot sl = wheel.getSlot(out);
            sb.append("{\"uniqKey\":").append(js(t[0])).append(",\"fireTime\":").append(out)
                .append(",\"realTopic\":").append(js(t[2])).append(",\"realQueueId\":").append(t[3])
                .append(",\"delivered\":").append(delivered)
                .append(",\"slot\":[").append(sl.timeMs).append(',').append(sl.firstPos).append(',').append(sl.lastPos)
                .append(',').append(sl.num).append(',').append(sl.magic).append("]}");
        }
        sb.append("]},");
        wheel.shutdown(false);   // (not the checkpoint's shutdown: it writes the file back)
    }

    // ---------------------------------------------------------------- recording
    /** DIR/geo.json's geometry and kind into the statics (as write set them). */
    static String loadGeo(String dir) throws Exception {
        String geo = new String(Files.readAllBytes(Paths.get(dir, "geo.json")), StandardCharsets.UTF_8);
        clSize = jlong(geo, "mappedFileSizeCommitLog");
        cqUnits = (int) (jlong(geo, "mappedFileSizeConsumeQueue") / 20);
        slots = (int) jlong(geo, "maxHashSlotNum");
        indexNum = (int) jlong(geo, "maxIndexNum");
        topics = jstrList(geo, "topics");
        String qs = geo.substring(geo.indexOf("\"queues\":[") + 10);
        qs = qs.substring(0, qs.indexOf(']'));
        queues = new ArrayList<>();
        for (String x : qs.split(",")) queues.add(Integer.parseInt(x.trim()));
        bcqUnits = (int) (jlong(geo, "mapperFileSizeBatchConsumeQueue") / 46);
        crcTail = geo.contains("\"enabledAppendPropCRC\":true");
        batchTopics = jstrList(geo, "batchTopics");
        lmqNames = jstrList(geo, "lmqNames");
        if (geo.contains("\"compTopics\":")) {
            compTopics = jstrList(geo, "compTopics");
            compLogSize = (int) jlong(geo, "compactionMappedFileSize");
            compCqSize = (int) jlong(geo, "compactionCqMappedFileSize");
        }
        int ki = geo.indexOf("\"kind\":\"") + 8;
        kind = geo.substring(ki, geo.indexOf('"', ki));
        if (kind.equals("timer")) {
            timerPrecision = (int) jlong(geo, "timerPrecisionMs");
            timerLogUnits = (int) (jlong(geo, "mappedFileSizeTimerLog") / 52);
            rollWindow = (int) jlong(geo, "timerRollWindowSlot");
            List<String> flat = jstrList(geo.replace("],[", ",").replace("\"timers\":[[", "\"timers\":["), "timers");
            for (int k = 0; k + 3 < flat.size(); k += 4) timers.add(new String[] {flat.get(k), flat.get(k + 1), flat.get(k + 2), flat.get(k + 3)});
        }
        return geo;
    }

    /** The oldest N commitlog files aged 100 h, then the broker's own clean services once each (deleted by
     *  a manual delete, as executeDeleteFilesManually asks), then a clean shutdown: min offsets move as
     *  RocketMQ moves them (ConsumeQueue min, BatchCQ min, the RocksDB queues' min keys). */
    static void expire(String dir, int n) throws Exception {
        loadGeo(dir);
        File[] cl = new File(dir, "commitlog").listFiles();
        Arrays.sort(cl);
        long old = System.currentTimeMillis() - 100L * 3600 * 1000;
        for (int i = 0; i < n && i < cl.length; i++) if (!cl[i].setLastModified(old)) throw new IllegalStateException("mtime");
        DefaultMessageStore s = open(dir, true);
        dispatched(s);
        long before = s.getMinPhyOffset();
        s.executeDeleteFilesManually();
        for (String name : new String[] {"cleanFilesPeriodically", "cleanQueueFilesPeriodically"}) {
            java.lang.reflect.Method m = DefaultMessageStore.class.getDeclaredMethod(name);
            m.setAccessible(true);
            for (int k = 0; k < n / 10 + 2; k++) m.invoke(s);
        }
        System.out.println("{\"minPhyBefore\":" + before + ",\"minPhyAfter\":" + s.getMinPhyOffset() + ",\"files\":"
            + new File(dir, "commitlog").list().length + "}");
        if (timer != null) timer.shutdown();
        s.shutdown();
    }

    static void record(String dir, String out, boolean start) throws Exception {
        String geo = loadGeo(dir);
        List<String> keys = jstrList(geo, "keys");
        List<String> uniq = jstrList(geo, "uniq");
        int realTopics = topics.size();
        Random r = new Random(jlong(geo, "seed") * 31 + 7);

        recording = true;
        DefaultMessageStore s = open(dir, start);
        if (start) dispatched(s);
        for (String nm : lmqNames) { topics.add(nm); queues.add(1); }
        Field f = DefaultMessageStore.class.getDeclaredField("indexService");
        f.setAccessible(true);
        IndexService idx = (IndexService) f.get(s);

        StringBuilder sb = new StringBuilder("{");
        kv(sb, "started", start).append(',');
        kv(sb, "minPhyOffset", s.getMinPhyOffset()).append(',');
        kv(sb, "maxPhyOffset", s.getMaxPhyOffset()).append(',');
        // queues + getMessage pages (a COMPACTION topic's by the plain path: its policy is lifted meanwhile; "compacted" has the other)
        compactionPolicy(s, false);
        sb.append("\"queues\":[");
        List<long[]> allPhy = new ArrayList<>();
        boolean firstQ = true;
        for (int t = 0; t < topics.size(); t++) {
            for (int q = 0; q < queues.get(t); q++) {
                String topic = topics.get(t);
                if (!firstQ) sb.append(',');
                firstQ = false;
                long mn = s.getMinOffsetInQueue(topic, q), mx = s.getMaxOffsetInQueue(topic, q);
                sb.append("{\"topic\":").append(js(topic)).append(",\"queueId\":").append(q);
                sb.append(",\"minOffset\":").append(mn).append(",\"maxOffset\":").append(mx);
                sb.append(",\"earliestMsgTime\":").append(s.getEarliestMessageTime(topic, q));
                sb.append(",\"pages\":[");
                long off = mn;
                boolean fp = true;
                List<Long> storeTimes = new ArrayList<>();
                for (int guard = 0; guard < 100000; guard++) {
                    GetMessageResult g = s.getMessage("g", topic, q, off, 32, null);
                    if (!fp) sb.append(',');
                    fp = false;
                    page(sb, g, off, storeTimes, allPhy);
                    boolean found = g != null && g.getStatus() == GetMessageStatus.FOUND;
                    long nxt = g == null ? -1 : g.getNextBeginOffset();
                    if (g != null) g.release();
                    if (!found || nxt == off) break;
                    off = nxt;
                }
                sb.append("],\"probes\":[");
                // extra pages: boundaries of CQ files, out of range
                List<Long> probes = new ArrayList<>(Arrays.asList(mx, mx + 5, mn - 1, -1L, 0L));
                for (long b = cqUnits; b < mx; b += cqUnits) { probes.add(b - 1); probes.add(b); }
                for (int k = 0; k < 3 && mx > 0; k++) probes.add((long) r.nextInt((int) mx));
                boolean fpr = true;
                for (long p : probes) {
                    int mn2 = 1 + r.nextInt(40);
                    GetMessageResult g = s.getMessage("g", topic, q, p, mn2, null);
                    if (!fpr) sb.append(',');
                    fpr = false;
                    sb.append("{\"maxNum\":").append(mn2).append(",\"page\":");
                    page(sb, g, p, null, null);
                    sb.append('}');
                    if (g != null) g.release();
                }
                sb.append("],\"timeLookups\":[");
                List<Long> ts = new ArrayList<>();
                if (!storeTimes.isEmpty()) {
                    long t0 = storeTimes.get(0), tl = storeTimes.get(storeTimes.size() - 1);
                    ts.addAll(Arrays.asList(0L, t0 - 1, t0, tl, tl + 1, tl + 3_600_000L, Long.MAX_VALUE / 2));
                    for (int k = 0; k < 6; k++) {
                        long x = storeTimes.get(r.nextInt(storeTimes.size()));
                        ts.add(x); ts.add(x + 1);
                    }
                    for (int k = 0; k < 3; k++) ts.add(t0 + (long) (r.nextDouble() * (tl - t0 + 1)));
                } else ts.add(System.currentTimeMillis());
                boolean ft = true;
                for (long x : ts) {
                    if (!ft) sb.append(',');
                    ft = false;
                    sb.append('[').append(x).append(',').append(s.getOffsetInQueueByTime(topic, q, x)).append(',').append(s.getOffsetInQueueByTime(topic, q, x, org.apache.rocketmq.common.BoundaryType.UPPER)).append(']');
                }
                sb.append("],\"storeTimeAt\":[");
                boolean fs = true;
                for (long qo : new long[] {mn, (mn + mx) / 2, mx - 1, mx}) {
                    if (!fs) sb.append(',');
                    fs = false;
                    sb.append('[').append(qo).append(',').append(s.getMessageStoreTimeStamp(topic, q, qo)).append(']');
                }
                sb.append("]}");
            }
        }
        sb.append("],");
        compactionPolicy(s, true);
        if (!compTopics.isEmpty()) recordCompacted(sb, s, dir, new Random(r.nextLong()));
        // key queries
        List<String[]> qk = new ArrayList<>();
        List<String> kl = new ArrayList<>(keys);
        Collections.shuffle(kl, r);
        for (String k : kl.subList(0, Math.min(70, kl.size()))) qk.add(new String[] {topics.get(r.nextInt(realTopics)), k});
        for (String sp : SPECIAL) for (String t : topics) qk.add(new String[] {t, sp});
        List<String> ul = new ArrayList<>(uniq);
        Collections.shuffle(ul, r);
        for (String u : ul.subList(0, Math.min(30, ul.size()))) for (String t : topics) qk.add(new String[] {t, u});
        for (String k : new String[] {"nope", "k-1", "", " ", "K1"}) qk.add(new String[] {topics.get(0), k});
        sb.append("\"keyQueries\":[");
        boolean fk = true;
        for (String[] tk : qk) {
            if (!fk) sb.append(',');
            fk = false;
            QueryMessageResult qr = s.queryMessage(tk[0], tk[1], 64, 0, Long.MAX_VALUE);
            List<Long> offs = new ArrayList<>();
            for (ByteBuffer bb : qr.getMessageBufferList()) offs.add(MessageDecoder.decode(bb.slice(), true, false).getCommitLogOffset());
            QueryOffsetResult qo = idx.queryOffset(tk[0], tk[1], 64, 0, Long.MAX_VALUE);
            sb.append("{\"topic\":").append(js(tk[0])).append(",\"key\":").append(js(tk[1]));
            sb.append(",\"phyOffsets\":").append(offs).append(",\"queryOffset\":").append(qo.getPhyOffsets());
            sb.append(",\"bufferTotalSize\":").append(qr.getBufferTotalSize());
            sb.append(",\"indexLastUpdatePhyoffset\":").append(qr.getIndexLastUpdatePhyoffset());
            sb.append(",\"indexLastUpdateTimestamp\":").append(qr.getIndexLastUpdateTimestamp()).append('}');
            qr.release();
        }
        sb.append("],");
        // lookMessageByOffset
        if (kind.equals("timer")) recordTimer(sb, s, dir, geo);
        sb.append("\"looks\":[");
        List<Long> lo = new ArrayList<>();
        for (int k = 0; k < 50 && !allPhy.isEmpty(); k++) lo.add(allPhy.get(r.nextInt(allPhy.size()))[0]);
        boolean fl = true;
        for (long o : lo) {
            if (!fl) sb.append(',');
            fl = false;
            MessageExt m = s.lookMessageByOffset(o);
            sb.append("{\"offset\":").append(o);
            if (m != null) {
                sb.append(",\"storeSize\":").append(m.getStoreSize()).append(",\"topic\":").append(js(m.getTopic()));
                sb.append(",\"queueId\":").append(m.getQueueId()).append(",\"queueOffset\":").append(m.getQueueOffset());
                sb.append(",\"keys\":").append(js(m.getKeys())).append(",\"tags\":").append(js(m.getTags()));
                sb.append(",\"uniq\":").append(js(m.getProperty("UNIQ_KEY")));
                sb.append(",\"bodyCRC\":").append(m.getBodyCRC()).append(",\"storeTimestamp\":").append(m.getStoreTimestamp());
                sb.append(",\"bornTimestamp\":").append(m.getBornTimestamp()).append(",\"sysFlag\":").append(m.getSysFlag());
                sb.append(",\"bodyLen\":").append(m.getBody() == null ? 0 : m.getBody().length);   // (an empty body is decoded as null)
                sb.append(",\"msgId\":").append(js(m.getMsgId()));
            }
            sb.append('}');
        }
        sb.append("]}");
        Files.write(Paths.get(out), sb.toString().getBytes(StandardCharsets.UTF_8));
        System.out.println("{\"recorded\":" + js(out) + "}");
        System.out.flush();
        if (start) s.shutdown();
    }

    /** Sets or lifts cleanup.policy=COMPACTION on the compacted topics' TopicConfigs (DefaultMessageStore.getMessage reads it per call). */
    static void compactionPolicy(DefaultMessageStore s, boolean on) {
        for (String t : compTopics) {
            Map<String, String> at = s.getTopicConfigs().get(t).getAttributes();
            if (on) at.put("cleanup.policy", "COMPACTION"); else at.remove("cleanup.policy");
        }
    }

    /** The compacted topics as DefaultMessageStore.getMessage serves them (CompactionStore.getMessage): per queue a walk
     *  from 0 by nextBeginOffset (32 a page) and a probe at every offset from -1 to the plain queue's max + 2 with a
     *  random maxNum; and the position checkpoint as loaded. A queue with no compaction log is asked again ("afterScan")
     *  once it has the empty CompactionLog the broker's topic scan (scanAllTopicConfig, every 30 s) gives it. */
    @SuppressWarnings("unchecked")
    static void recordCompacted(StringBuilder sb, DefaultMessageStore s, String dir, Random r) throws Exception {
        CompactionStore cs = compactionStore(s);
        Field tf = CompactionStore.class.getDeclaredField("compactionLogTable");
        tf.setAccessible(true);
        Map<String, CompactionLog> table = (Map<String, CompactionLog>) tf.get(cs);
        List<Object[]> noLog = new ArrayList<>();
        sb.append("\"compacted\":{\"checkpoint\":").append(offsetMap(cs)).append(",\"queues\":[");
        boolean firstQ = true;
        for (String topic : compTopics) {
            for (int q = 0; q < queues.get(topics.indexOf(topic)); q++) {
                long mx = s.getMaxOffsetInQueue(topic, q);
                if (!table.containsKey(topic + "_" + q)) noLog.add(new Object[] {topic, q});
                sb.append(firstQ ? "" : ",").append("{\"topic\":").append(js(topic)).append(",\"queueId\":").append(q);
                sb.append(",\"plainMaxOffset\":").append(mx).append(",\"logDir\":").append(new File(dir, "compaction/compactionLog/" + topic + "/" + q).isDirectory());
                firstQ = false;
                sb.append(",\"walk\":[");
                long off = 0;
                for (int guard = 0; guard < 100000; guard++) {
                    GetMessageResult g = s.getMessage("g", topic, q, off, 32, null);
                    sb.append(guard > 0 ? "," : "");
                    page(sb, g, off, null, null);
                    if (g == null) break;
                    String st = g.getStatus().name();
                    long nxt = g.getNextBeginOffset();
                    g.release();
                    if (nxt <= off || st.startsWith("OFFSET_OVERFLOW") || st.equals("NO_MATCHED_LOGIC_QUEUE") || st.equals("NO_MESSAGE_IN_QUEUE")) break;
                    off = nxt;
                }
                sb.append("],\"probes\":[");
                for (long p = -1; p <= mx + 2; p++) {
                    int n = 1 + r.nextInt(40);
                    GetMessageResult g = s.getMessage("g", topic, q, p, n, null);
                    sb.append(p > -1 ? "," : "").append("{\"maxNum\":").append(n).append(",\"page\":");
                    page(sb, g, p, null, null);
                    sb.append('}');
                    if (g != null) g.release();
                }
                sb.append("]}");
            }
        }
        sb.append("],\"afterScan\":[");
        for (Object[] tq : noLog) {   // loadAndGetClog's steps, its doCompaction schedule left out
            String topic = (String) tq[0];
            int q = (Integer) tq[1];
            table.put(topic + "_" + q, new CompactionLog(s, cs, topic, q));
            table.get(topic + "_" + q).load(true);
            for (long p = -1; p <= 1; p++) {
                GetMessageResult g = s.getMessage("g", topic, q, p, 32, null);
                sb.append(tq == noLog.get(0) && p == -1 ? "" : ",").append("{\"topic\":").append(js(topic)).append(",\"queueId\":").append(q).append(",\"page\":");
                page(sb, g, p, null, null);
                sb.append('}');
            }
        }
        sb.append("]},");
    }

    static void page(StringBuilder sb, GetMessageResult g, long off, List<Long> storeTimes, List<long[]> allPhy) {
        sb.append("{\"offset\":").append(off);
        if (g == null) { sb.append(",\"null\":true}"); return; }
        sb.append(",\"status\":\"").append(g.getStatus()).append('"');
        sb.append(",\"nextBeginOffset\":").append(g.getNextBeginOffset());
        sb.append(",\"minOffset\":").append(g.getMinOffset()).append(",\"maxOffset\":").append(g.getMaxOffset());
        sb.append(",\"bufferTotalSize\":").append(g.getBufferTotalSize());
        sb.append(",\"messageCount\":").append(g.getMessageCount());
        sb.append(",\"phyOffsets\":[");
        boolean f = true;
        for (SelectMappedBufferResult m : g.getMessageMapedList()) {
            if (!f) sb.append(',');
            f = false;
            sb.append(m.getStartOffset());
            if (storeTimes != null) {
                MessageExt x = MessageDecoder.decode(m.getByteBuffer().slice(), true, false);
                storeTimes.add(x.getStoreTimestamp());
                allPhy.add(new long[] {m.getStartOffset()});
            }
        }
        sb.append("],\"queueOffsets\":[");
        f = true;
        for (ByteBuffer bb : g.getMessageBufferList()) {
            if (!f) sb.append(',');
            f = false;
            sb.append(MessageDecoder.decode(bb.slice(), true, false).getQueueOffset());
        }
        sb.append("]}");
    }

    // ---------------------------------------------------------------- tiny JSON
    static StringBuilder kv(StringBuilder sb, String k, Object v) {
        return sb.append(js(k)).append(':').append(v instanceof String ? js((String) v) : String.valueOf(v));
    }

    static String js(String s) {
        if (s == null) return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static String jsonList(List<String> l) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < l.size(); i++) { if (i > 0) b.append(','); b.append(js(l.get(i))); }
        return b.append(']').toString();
    }

    static long jlong(String j, String k) {
        int i = j.indexOf("\"" + k + "\":") + k.length() + 3;
        int e = i;
        while (e < j.length() && (Character.isDigit(j.charAt(e)) || j.charAt(e) == '-')) e++;
        return Long.parseLong(j.substring(i, e));
    }

    static List<String> jstrList(String j, String k) {
        int i = j.indexOf("\"" + k + "\":[") + k.length() + 4;
        List<String> out = new ArrayList<>();
        while (j.charAt(i) != ']') {
            if (j.charAt(i) == ',') { i++; continue; }
            // j.charAt(i) == '"'
            StringBuilder b = new StringBuilder();
            i++;
            while (j.charAt(i) != '"') {
                char c = j.charAt(i);
                if (c == '\\') {
                    char n = j.charAt(i + 1);
                    if (n == 'u') { b.append((char) Integer.parseInt(j.substring(i + 2, i + 6), 16)); i += 6; }
                    else { b.append(n); i += 2; }
                } else { b.append(c); i++; }
            }
            out.add(b.toString());
            i++;
        }
        return out;
    }
}
