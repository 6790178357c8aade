package com.conversantmedia.util.concurrent;

import java.util.concurrent.ArrayBlockingQueue;

/**
 * Local shim for com.conversantmedia:disruptor's DisruptorBlockingQueue (used by TimerMessageStore only
 * when timerEnableDisruptor=true). Same BlockingQueue contract, backed by ArrayBlockingQueue.
 */
public class DisruptorBlockingQueue<E> extends ArrayBlockingQueue<E> {
    public DisruptorBlockingQueue(final int capacity) {
        super(capacity);
    }
}
