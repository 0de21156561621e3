package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.netreduce.ForeignTagEvents;
import io.netreduce.protocol.element.SumKernel;

import io.netreduce.dataplane.clt.ConnectionTable;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.PacketPort;
import org.HdrHistogram.SingleWriterRecorder;
import org.agrona.concurrent.status.AtomicCounter;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.ManyToOneConcurrentArrayQueue;

import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The dataplane duty cycle: apply a few pending control commands, receive a batch from every port through the
 * {@link PacketProcessor}, flush every port. Run it on an {@link org.agrona.concurrent.AgentRunner} (or call
 * {@link #doWork()} from a test). The agent's thread is the only writer of the tables, the aggregator memory,
 * the counters and the latency recorder.
 */
public final class DataplaneAgent implements Agent
{
    /** Kernel calls per element type at start, past the JIT's compile threshold. */
    private static final int WARM_UP_ITERATIONS = 12_000;

    private final CompletableFuture<Void> ready = new CompletableFuture<>();
    private final PacketPort[] ports;
    /** Per port: the receive backlog, in frames, at which a batch's packets count as marked CE; 0: never. */
    private final int[] ecnBacklogFrames;
    private final int batchSize;
    private final int commandsPerCycle;
    private final ManyToOneConcurrentArrayQueue<DataplaneCommand> commands;
    private final DataplaneTables tables;
    private final DataplaneCounters counters;
    private final SingleWriterRecorder latency;
    private final PacketProcessor processor;
    private final LaneHandle handle;
    private final DataplaneProxy proxy;
    private final long foreignIdleNs;
    private final long warmUpFrames;
    private final AfPacketConfiguration warmUpPortSettings;
    private volatile PacketPathWarmUp.Report warmUp;
    private final AtomicCounter foreignExpired;
    private final AtomicCounter staleExpired;
    private long lastSweepNs;

    public DataplaneAgent(final DataplaneContext context)
    {
        context.conclude();
        this.ports = context.ports().toArray(new PacketPort[0]);
        this.ecnBacklogFrames = new int[ports.length];
        for (int i = 0; i < ports.length; i++)
        {
            ecnBacklogFrames[i] = context.ecnBacklogFrames(ports[i]);
        }
        this.batchSize = context.batchSize();
        this.commandsPerCycle = context.commandsPerCycle();
        this.commands = new ManyToOneConcurrentArrayQueue<>(context.commandQueueCapacity());
        this.counters = context.counters();
        this.tables = new DataplaneTables(new ConnectionTable(context.cltEntries(), context.cltForeignEntries(),
            context.cltForeignPerSource()), context.memoryBudget(), counters, context.abandonedRunNs());
        this.latency = new SingleWriterRecorder(1, context.highestLatencyNs(), 3);
        final ForeignTagEvents foreignTags = new ForeignTagEvents();
        this.processor = new PacketProcessor(tables, counters, ports, context.peers(), latency,
            context.highestLatencyNs(), foreignTags);
        this.processor.faultInjection(context.dropProbability(), context.dropSeed());
        this.handle = new LaneHandle(commands, counters, latency, foreignTags);
        this.proxy = new DataplaneProxy(List.of(handle), context.memoryBudget(), LaneSteering.NONE);
        this.foreignIdleNs = context.foreignIdleNs();
        this.warmUpFrames = context.warmUpFrames();
        this.warmUpPortSettings = context.warmUpPortSettings();
        this.foreignExpired = counters.counter(DataplaneCounter.CLT_FOREIGN_EXPIRED);
        this.staleExpired = counters.counter(DataplaneCounter.CLT_STALE_EXPIRED);
    }

    /**
     * @return what a multi-lane proxy needs of this agent.
     */
    LaneHandle handle()
    {
        return handle;
    }

    /**
     * @return the control plane's handle on this agent alone (thread-safe); a {@link DataplaneLanes} has one over
     *         all its agents.
     */
    public DataplaneProxy proxy()
    {
        return proxy;
    }

    public DataplaneCounters counters()
    {
        return counters;
    }

    /**
     * @return the tables, for tests and benchmarks running on the agent's thread.
     */
    public DataplaneTables tables()
    {
        return tables;
    }

    @Override
    public int doWork()
    {
        int work = applyCommands();
        final long now = System.nanoTime();
        for (int i = 0; i < ports.length; i++)
        {
            final PacketPort port = ports[i];
            processor.beginBatch(i, now, port, ecnBacklogFrames[i]);
            work += port.receive(processor, batchSize);
        }
        for (final PacketPort port : ports)
        {
            port.flush();
        }
        if (now - lastSweepNs > DataplaneContext.SWEEP_INTERVAL_NS)
        {
            lastSweepNs = now;
            final int expired = tables.clt.expireForeign(now, foreignIdleNs, DataplaneContext.SWEEP_SLOTS);
            if (expired > 0)
            {
                foreignExpired.getAndAddRelease(expired);
            }
            final int stale = tables.clt.expireStale(now, foreignIdleNs, DataplaneContext.SWEEP_SLOTS,
                processor.staleTest());
            if (stale > 0)
            {
                staleExpired.getAndAddRelease(stale);
            }
        }
        return work;
    }

    private int applyCommands()
    {
        int applied = 0;
        DataplaneCommand command;
        while (applied < commandsPerCycle && (command = commands.poll()) != null)
        {
            apply(command);
            applied++;
        }
        return applied;
    }

    private void apply(final DataplaneCommand command)
    {
        try
        {
            switch (command)
            {
                case DataplaneCommand.InstallRing install -> install.reply().complete(tables.install(install.config()));
                case DataplaneCommand.RemoveRing remove -> remove.reply().complete(tables.remove(remove.ringId()));
                case DataplaneCommand.SnapshotConnections snapshot -> snapshot.reply().complete(tables.connections());
                case DataplaneCommand.SnapshotRing snapshot -> snapshot.reply().complete(
                    tables.occupancy(snapshot.ringId(), snapshot.limit(), System.nanoTime()));
                case DataplaneCommand.ListRings list -> list.reply().complete(tables.list());
                case DataplaneCommand.StartCapture start ->
                {
                    processor.installTap(start.tap());
                    start.reply().complete(start.tap());
                }
                case DataplaneCommand.StopCapture stop -> stop.reply().complete(processor.removeTap(stop.captureId()));
                case DataplaneCommand.InstallSwitchMlJob install ->
                    install.reply().complete(tables.switchMl().install(install.definition()));
                case DataplaneCommand.ResetSwitchMlJob reset -> reset.reply().complete(tables.switchMl().reset(reset.job()));
                case DataplaneCommand.RemoveSwitchMlJob remove ->
                    remove.reply().complete(tables.switchMl().remove(remove.job()));
                case DataplaneCommand.ListSwitchMlJobs list -> list.reply().complete(tables.switchMl().list());
            }
        }
        catch (final RuntimeException ex)
        {
            // A refused command is an answer, not a dataplane failure: the control thread gets the reason.
            command.reply().completeExceptionally(ex);
        }
    }

    /**
     * On the agent's own thread, before the first duty cycle: compile the summation kernels, then run the context's
     * {@link DataplaneContext#warmUpFrames() warm-up frames} through a private copy of the packet path.
     */
    @Override
    public void onStart()
    {
        try
        {
            SumKernel.warmUp(WARM_UP_ITERATIONS);
            warmUp = PacketPathWarmUp.run(warmUpFrames, PacketPathWarmUp.DEFAULT_MAX_NANOS, warmUpPortSettings,
                PacketPathWarmUp.DEFAULT_SETTLE_PASSES);
        }
        catch (final Throwable t)
        {
            ready.completeExceptionally(t);
            throw t;
        }
        ready.complete(null);
    }

    /**
     * @return completed when the agent has warmed up and runs its duty cycle: commands sent before then wait in the
     * queue behind the warm-up, which on a loaded machine can take seconds, so a caller that times its commands
     * waits for this first.
     */
    public CompletableFuture<Void> ready()
    {
        return ready;
    }

    /**
     * @return what the packet path's warm-up did ({@link PacketPathWarmUp}), once {@link #ready()}; null before.
     */
    public PacketPathWarmUp.Report warmUp()
    {
        return warmUp;
    }

    @Override
    public void onClose()
    {
        DataplaneCommand command;
        while ((command = commands.poll()) != null)
        {
            command.reply().completeExceptionally(new IllegalStateException("dataplane closed"));
        }
        tables.close();
    }

    @Override
    public String roleName()
    {
        return "netreduce-dataplane";
    }
}
