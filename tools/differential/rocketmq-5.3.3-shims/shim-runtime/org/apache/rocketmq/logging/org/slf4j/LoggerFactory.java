package org.apache.rocketmq.logging.org.slf4j;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;

/**
 * Local shim for the shaded slf4j LoggerFactory. Delegates to the real (unshaded) slf4j:
 * whatever slf4j provider is on the classpath receives the logs (slf4j-nop => silent,
 * slf4j-simple => stderr, none => slf4j's NOP fallback with a one-time warning).
 */
public final class LoggerFactory {
    private static final ConcurrentMap<String, Logger> CACHE = new ConcurrentHashMap<>();

    private LoggerFactory() {
    }

    public static Logger getLogger(String name) {
        return CACHE.computeIfAbsent(name, LoggerFactory::create);
    }

    public static Logger getLogger(Class<?> clazz) {
        return getLogger(clazz.getName());
    }

    private static Logger create(String name) {
        final org.slf4j.Logger target = org.slf4j.LoggerFactory.getLogger(name);
        InvocationHandler h = new InvocationHandler() {
            @Override
            public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
                if (method.getDeclaringClass() == Object.class) {
                    switch (method.getName()) {
                        case "equals":
                            return proxy == args[0];
                        case "hashCode":
                            return System.identityHashCode(proxy);
                        case "toString":
                            return "ShimLogger[" + name + "]";
                        default:
                            break;
                    }
                }
                try {
                    return method.invoke(target, args);
                } catch (InvocationTargetException e) {
                    throw e.getCause();
                }
            }
        };
        return (Logger) Proxy.newProxyInstance(Logger.class.getClassLoader(), new Class<?>[] {Logger.class}, h);
    }
}
