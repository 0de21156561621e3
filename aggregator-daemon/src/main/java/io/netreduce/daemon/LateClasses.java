package io.netreduce.daemon;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;

/**
 * Classes the daemon would first load after its packet path's warm-up, loaded before it.
 * <p>
 * Why: C2 compiles a method under assumptions about the class hierarchy as it stands (that a class has no
 * subclass loaded, that no loaded class has a finalizer), and loading a class that breaks one throws every method
 * compiled under it away. The control API and the metrics endpoint start after the dataplane's warm-up
 * ({@code PacketPathWarmUp}) and load such classes: in a compile log of a daemon on the bed
 * ({@code -XX:+LogCompilation}, 2026-11-26) the API's selector loaded {@code CancelledKeyException}, the first
 * subclass of {@code IllegalStateException}, and C2's code for {@code Aggregator.complete} and two more methods the
 * warm-up had compiled was discarded a moment after the warm-up; Netty's {@code AdaptivePoolingAllocator} (a class
 * with a finalizer) and Jackson's {@code InternCache} (a subclass of {@code ConcurrentHashMap}) did the same to
 * others at the metrics endpoint's start and the first request. The packet path was then compiled again during the
 * first job's calls. Loading (not initialising) these classes first puts them in the hierarchy before anything is
 * compiled. A class not found (another library version) is skipped: this only saves compile time.
 */
final class LateClasses
{
    private static final Logger LOG = LoggerFactory.getLogger(LateClasses.class);

    /** Loaded by {@link #load()}: the ones the compile log named. */
    static final List<String> NAMES = List.of(
        "java.nio.channels.CancelledKeyException",
        "io.netty.buffer.AdaptivePoolingAllocator",
        "com.fasterxml.jackson.core.util.InternCache");

    private LateClasses()
    {
    }

    /**
     * Load {@link #NAMES} without initialising them.
     *
     * @return how many were loaded.
     */
    static int load()
    {
        final ClassLoader loader = LateClasses.class.getClassLoader();
        int loaded = 0;
        for (final String name : NAMES)
        {
            try
            {
                Class.forName(name, false, loader);
                loaded++;
            }
            catch (final ClassNotFoundException | LinkageError ex)
            {
                LOG.debug("class {} not loaded ahead of the warm-up: {}", name, ex.toString());
            }
        }
        return loaded;
    }
}
