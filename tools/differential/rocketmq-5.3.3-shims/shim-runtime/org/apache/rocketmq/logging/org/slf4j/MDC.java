package org.apache.rocketmq.logging.org.slf4j;

/** Local shim for the shaded slf4j MDC; delegates to org.slf4j.MDC. */
public final class MDC {
    private MDC() {
    }

    public static void put(String key, String val) {
        org.slf4j.MDC.put(key, val);
    }

    public static String get(String key) {
        return org.slf4j.MDC.get(key);
    }

    public static void remove(String key) {
        org.slf4j.MDC.remove(key);
    }

    public static void clear() {
        org.slf4j.MDC.clear();
    }
}
