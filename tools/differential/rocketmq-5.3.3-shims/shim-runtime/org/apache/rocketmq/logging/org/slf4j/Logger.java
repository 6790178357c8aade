package org.apache.rocketmq.logging.org.slf4j;

/**
 * Local shim for RocketMQ 5.x's shaded slf4j Logger (io.github.aliyunmq:rocketmq-slf4j-api).
 * It is simply the plain slf4j 2.x Logger API under the shaded name; LoggerFactory returns
 * a proxy that forwards every call to org.slf4j.LoggerFactory.getLogger(name).
 */
public interface Logger extends org.slf4j.Logger {
}
