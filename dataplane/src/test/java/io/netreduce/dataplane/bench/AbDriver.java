package io.netreduce.dataplane.bench;

import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneContext;
import io.netreduce.dataplane.agent.DataplaneLanes;
import io.netreduce.dataplane.agent.DataplaneProxy;
import io.netreduce.dataplane.agent.LaneSteering;
import io.netreduce.dataplane.agent.ReplayPort;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.protocol.port.PacketPort;

import java.lang.reflect.Method;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * {@link PacketPathBenchmark}'s invocation (8,192 new frames into a freshly installed ring), timed by hand, for
 * {@link AbMain}: one instance per build, each loaded in a class loader of its own, so that two builds run
 * interleaved in one JVM and see the same machine. Uses only what the builds have had since 2026-11-26
 * ({@link PacketPathBenchmark}'s {@code ring}, {@code stream} and {@code rewind} methods, the dataplane's
 * {@link ReplayPort}), so an older build's test classes serve with this class put in front of them; for a build
 * before that, use this class as it was then (git history).
 */
public final class AbDriver
{
    private final DataplaneAgent agent;
    private final DataplaneProxy proxy;
    private final ReplayPort port;
    private final Method rewind;
    private final RingDefinition config;
    private final int frames;

    @SuppressWarnings("unchecked")
    public AbDriver(final int payload) throws Exception
    {
        final Method ring = PacketPathBenchmark.class.getDeclaredMethod("ring", int.class, int.class);
        ring.setAccessible(true);
        config = (RingDefinition)ring.invoke(null, 0, payload);
        final Method stream = PacketPathBenchmark.class.getDeclaredMethod("stream", RingDefinition.class);
        stream.setAccessible(true);
        final List<byte[]> list = (List<byte[]>)stream.invoke(null, config);
        frames = list.size();
        port = ReplayPort.of(list);
        rewind = PacketPathBenchmark.class.getDeclaredMethod("rewind", ReplayPort.class, int.class);
        rewind.setAccessible(true);
        final DataplaneLanes lanes = new DataplaneLanes(new DataplaneContext().batchSize(64).ecnBacklog(0),
            List.of(List.<PacketPort>of(port)), LaneSteering.NONE);
        agent = lanes.agent(0);
        proxy = lanes.proxy();
        apply(proxy.installRing(config, 0));
    }

    private void apply(final CompletableFuture<?> reply)
    {
        while (!reply.isDone())
        {
            agent.doWork();
        }
        reply.join();
    }

    public int frames()
    {
        return frames;
    }

    /** One invocation: a fresh ring and the stream rewound (not timed), then every frame fed (timed). */
    public long invocationNs() throws Exception
    {
        apply(proxy.removeRing(config.ringId()));
        apply(proxy.installRing(config, 0));
        rewind.invoke(null, port, frames);
        final long completed = agent.counters().get(DataplaneCounter.AGGREGATIONS_COMPLETED);
        final long start = System.nanoTime();
        while (port.remaining() > 0)
        {
            agent.doWork();
        }
        final long ns = System.nanoTime() - start;
        if (agent.counters().get(DataplaneCounter.AGGREGATIONS_COMPLETED) - completed != frames / 4 ||
            port.sent() != frames)
        {
            throw new IllegalStateException("not every frame aggregated");
        }
        port.resetSent();
        return ns;
    }
}
