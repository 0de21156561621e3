package io.netreduce.dataplane.support;

import io.netreduce.protocol.support.Gradients;
import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * A whole ring of simulated workers around a dataplane harness, with a lossy network and RC go-back-N.
 * <p>
 * Each rank sends its messages in order through a NetReduce window of N messages (it may start message m once
 * it has received the whole result of message m - N from its predecessor). Frames may be lost on the way to the
 * appliance, duplicated, or lost on the way back; a receiver accepts only the next expected PSN (RC), and when
 * nothing can move a sender goes back to its receiver's first missing PSN (timeout, go-back-N); senders also
 * time out spuriously now and then. The run ends when every connection has delivered every message.
 */
public final class RingSimulation
{
    private final DataplaneHarness harness;
    private final RingDefinition config;
    private final int messages;
    private final Random random;
    private final double dropOut;
    private final int ranks;
    private final int receiveQpBase;
    private final RingWorker[] workers;
    private final int[] firstPsn;
    private final byte[][][] gradients;
    private final List<List<byte[]>> frames;
    private final GoBackNWorkers senders;
    private final List<List<byte[]>> delivered = new ArrayList<>();
    private final List<byte[]> allResults = new ArrayList<>();
    private final RoceFrame frame = new RoceFrame();
    private final Icrc icrc = new Icrc();
    private int badIcrc;
    private int injected;

    public RingSimulation(
        final DataplaneHarness harness,
        final RingDefinition config,
        final int messages,
        final long dataSeed,
        final long networkSeed,
        final double dropIn,
        final double duplicate,
        final double dropOut,
        final double spuriousTimeout)
    {
        this(harness, config, messages, dataSeed, networkSeed, dropIn, duplicate, dropOut, spuriousTimeout,
            RingWorker.defaultReceiveQp(0));
    }

    /**
     * @param receiveQpBase receive QP of rank 0; rank r receives on {@code receiveQpBase + r} (a ring run again
     *                      over new QPs uses another base).
     */
    public RingSimulation(
        final DataplaneHarness harness,
        final RingDefinition config,
        final int messages,
        final long dataSeed,
        final long networkSeed,
        final double dropIn,
        final double duplicate,
        final double dropOut,
        final double spuriousTimeout,
        final int receiveQpBase)
    {
        this(harness, config, messages, null, new Random(dataSeed), networkSeed, dropIn, duplicate, dropOut,
            spuriousTimeout, receiveQpBase);
    }

    /**
     * @param psns where the start PSNs come from; null: from {@code data}, before the gradients.
     */
    private RingSimulation(
        final DataplaneHarness harness,
        final RingDefinition config,
        final int messages,
        final Random psns,
        final Random data,
        final long networkSeed,
        final double dropIn,
        final double duplicate,
        final double dropOut,
        final double spuriousTimeout,
        final int receiveQpBase)
    {
        this.harness = harness;
        this.config = config;
        this.messages = messages;
        this.random = new Random(networkSeed);
        this.dropOut = dropOut;
        this.ranks = config.worldSize();
        this.receiveQpBase = receiveQpBase;
        this.workers = new RingWorker[ranks];
        this.firstPsn = new int[ranks];
        final Random psnSource = psns != null ? psns : data;
        for (int r = 0; r < ranks; r++)
        {
            // Some connections start just below the 24-bit PSN wrap.
            firstPsn[r] = psnSource.nextBoolean() ? psnSource.nextInt(1 << 24) : (1 << 24) - 1 - psnSource.nextInt(50);
            final int successor = (r + 1) % ranks;
            workers[r] = receiveQpBase == RingWorker.defaultReceiveQp(0) ? RingWorker.of(config, r, firstPsn[r]) :
                new RingWorker(config, r, receiveQpBase + successor, firstPsn[r], RingWorker.macOf(r),
                    RingWorker.macOf(successor));
        }
        gradients = GoBackNWorkers.randomGradients(workers, config.elementType(), messages, data);
        frames = GoBackNWorkers.framesOf(workers, gradients);
        for (int r = 0; r < ranks; r++)
        {
            delivered.add(new ArrayList<>());
        }
        senders = new GoBackNWorkers(config.window(), config.msgLen(), frames, random, dropIn, duplicate,
            spuriousTimeout);
    }

    public static RingSimulation lossless(
        final DataplaneHarness harness, final RingDefinition config, final int messages, final long seed)
    {
        return new RingSimulation(harness, config, messages, seed, seed + 1, 0, 0, 0, 0);
    }

    /**
     * A job on the default receive QPs whose start PSNs come from {@code psnSeed} and whose data comes from
     * {@code dataSeed}: two jobs with the same PSN seed reuse the QP numbers and start PSNs with other data.
     */
    public static RingSimulation reusingPsns(
        final DataplaneHarness harness,
        final RingDefinition config,
        final int messages,
        final long psnSeed,
        final long dataSeed,
        final long networkSeed,
        final double loss)
    {
        return new RingSimulation(harness, config, messages, new Random(psnSeed), new Random(dataSeed), networkSeed,
            loss, loss, loss, loss / 10, RingWorker.defaultReceiveQp(0));
    }

    /**
     * Run to completion.
     *
     * @throws IllegalStateException if the ring stops making progress (a livelock).
     */
    public RingSimulation run()
    {
        senders.run(messages, 50, 10, (rank, frame) -> inject(frame), this::progress);
        return this;
    }

    private void inject(final byte[] bytes)
    {
        injected++;
        for (final byte[] out : harness.process(bytes))
        {
            allResults.add(out);
            final UnsafeBuffer buffer = new UnsafeBuffer(out);
            if (frame.wrap(buffer, 0, out.length) != RoceFrame.OK || !icrc.verify(frame))
            {
                badIcrc++;
                continue;
            }
            final int successor = frame.destQp() - receiveQpBase;
            final int connection = (successor + ranks - 1) % ranks;
            final int index = BthHeader.psnDelta(frame.psn(), firstPsn[connection]);
            if (dropOut > 0 && random.nextDouble() < dropOut)
            {
                continue;
            }
            if (senders.accept(connection, index))
            {
                delivered.get(connection).add(out);
            }
        }
    }

    private String progress()
    {
        return senders.progress();
    }

    /**
     * @return the frames each connection (by sending rank) accepted, in PSN order.
     */
    public List<List<byte[]>> delivered()
    {
        return delivered;
    }

    /**
     * @return every frame the appliance emitted.
     */
    public List<byte[]> results()
    {
        return allResults;
    }

    public int badIcrcResults()
    {
        return badIcrc;
    }

    public int injected()
    {
        return injected;
    }

    /**
     * @return what connection {@code rank} must deliver for message {@code m}: the rank's own INA header, with
     * the ring's result tag, followed by the reference sum.
     */
    public byte[] expectedMessage(final int rank, final int m)
    {
        return GoBackNWorkers.resultMessage(config, rank, m, Gradients.referenceSum(config.elementType(), gradients[m]));
    }

    /**
     * @return the bytes connection {@code rank} delivered for message {@code m} (the RC payloads concatenated).
     */
    public byte[] deliveredMessage(final int rank, final int m)
    {
        return GoBackNWorkers.payloadsOf(delivered.get(rank), m, config.msgLen());
    }

    public int messages()
    {
        return messages;
    }

    public RingWorker worker(final int rank)
    {
        return workers[rank];
    }

    public List<byte[]> framesOf(final int rank)
    {
        return frames.get(rank);
    }
}
