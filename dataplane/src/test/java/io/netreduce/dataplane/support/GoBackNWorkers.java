package io.netreduce.dataplane.support;

import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.support.Gradients;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.ByteArrayOutputStream;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;

/**
 * The worker side of the ring simulations ({@link RingSimulation}, {@link HierarchySimulation}): W ranks, each
 * sending its connection's pre-built frames in PSN order, at most {@code window} messages ahead of the results it
 * has received from its predecessor's connection, and going back to its first unanswered frame when nothing can
 * move (the RC timeout) or at random (a spurious timeout). A receiver accepts only the next expected frame of a
 * connection ({@link #accept}). Where the frames go is the simulation's ({@link Network}): one appliance, or a
 * hierarchy of them.
 * <p>
 * Draws from the simulation's own {@link Random}, in the order the simulations always drew, so a seeded case
 * replays as it did.
 */
final class GoBackNWorkers
{
    /**
     * Where a rank's frame goes when it is sent.
     */
    interface Network
    {
        void send(int rank, byte[] frame);
    }

    private final int ranks;
    private final int window;
    private final int msgLen;
    private final List<List<byte[]>> frames;
    private final Random random;
    private final double dropOnTheWayIn;
    private final double duplicate;
    private final double spuriousTimeout;
    private final int[] sendIndex;
    private final int[] received;

    /**
     * @param frames          each rank's frames, in PSN order.
     * @param random          the simulation's random source, shared with its network.
     * @param dropOnTheWayIn  probability that a frame a worker sends is lost before the first appliance.
     * @param duplicate       probability that a frame that arrived arrives a second time.
     * @param spuriousTimeout probability per step that a random rank goes back to its first unanswered frame.
     */
    GoBackNWorkers(
        final int window,
        final int msgLen,
        final List<List<byte[]>> frames,
        final Random random,
        final double dropOnTheWayIn,
        final double duplicate,
        final double spuriousTimeout)
    {
        this.ranks = frames.size();
        this.window = window;
        this.msgLen = msgLen;
        this.frames = frames;
        this.random = random;
        this.dropOnTheWayIn = dropOnTheWayIn;
        this.duplicate = duplicate;
        this.spuriousTimeout = spuriousTimeout;
        this.sendIndex = new int[ranks];
        this.received = new int[ranks];
    }

    /**
     * @return {@code [message][rank]} random gradients of each worker's size, drawn message by message.
     */
    static byte[][][] randomGradients(
        final RingWorker[] workers, final ElementType type, final int messages, final Random data)
    {
        final byte[][][] gradients = new byte[messages][workers.length][];
        for (int m = 0; m < messages; m++)
        {
            for (int r = 0; r < workers.length; r++)
            {
                gradients[m][r] = Gradients.random(type, workers[r].gradientBytes(), data);
            }
        }
        return gradients;
    }

    /**
     * @return each worker's frames of all its messages, in PSN order.
     */
    static List<List<byte[]>> framesOf(final RingWorker[] workers, final byte[][][] gradients)
    {
        final List<List<byte[]>> frames = new ArrayList<>();
        for (int r = 0; r < workers.length; r++)
        {
            final List<byte[]> list = new ArrayList<>();
            for (int m = 0; m < gradients.length; m++)
            {
                list.addAll(workers[r].message(m, gradients[m][r]));
            }
            frames.add(list);
        }
        return frames;
    }

    /**
     * @return what a connection of rank {@code rank} must deliver for message {@code m}: the rank's own INA header
     * with the ring's result tag, followed by {@code sum}.
     */
    static byte[] resultMessage(final RingDefinition config, final int rank, final int m, final byte[] sum)
    {
        final byte[] message = new byte[InaHeader.LENGTH + sum.length];
        InaHeader.write(new UnsafeBuffer(message), 0, config.resultTag(), config.ringId(), m & 0xFF, config.msgLen(),
            rank);
        System.arraycopy(sum, 0, message, InaHeader.LENGTH, sum.length);
        return message;
    }

    /**
     * @return the RC payloads of message {@code m}'s {@code msgLen} frames in {@code delivered}, concatenated.
     */
    static byte[] payloadsOf(final List<byte[]> delivered, final int m, final int msgLen)
    {
        final RoceFrame frame = new RoceFrame();
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (int p = 0; p < msgLen; p++)
        {
            final byte[] bytes = delivered.get(m * msgLen + p);
            frame.wrap(new UnsafeBuffer(bytes), 0, bytes.length);
            out.write(bytes, frame.payloadOffset(), frame.payloadLength());
        }
        return out.toByteArray();
    }

    /**
     * Run until every connection delivered all {@code messages} messages.
     *
     * @param stepsPerFrame bound on the steps per frame sent, before "no progress" is declared.
     * @param idlePerFrame  bound on the go-back rounds per frame, before a livelock is declared.
     * @param progress      what the simulation can tell about its state, for the error.
     * @throws IllegalStateException if the ring stops making progress.
     */
    void run(
        final int messages,
        final long stepsPerFrame,
        final int idlePerFrame,
        final Network network,
        final Supplier<String> progress)
    {
        final int total = messages * msgLen;
        final int[] candidates = new int[ranks];
        long steps = 0;
        int idleRounds = 0;
        while (true)
        {
            if (++steps > stepsPerFrame * total * ranks + 100_000)
            {
                throw new IllegalStateException("ring made no progress: " + progress.get());
            }
            int count = 0;
            for (int r = 0; r < ranks; r++)
            {
                if (sendIndex[r] < total && mayStart(r, sendIndex[r] / msgLen))
                {
                    candidates[count++] = r;
                }
            }
            if (count == 0)
            {
                if (allDelivered(total))
                {
                    return;
                }
                boolean changed = false;
                for (int r = 0; r < ranks; r++)
                {
                    if (received[r] < sendIndex[r])
                    {
                        sendIndex[r] = received[r];
                        changed = true;
                    }
                }
                if (!changed || ++idleRounds > idlePerFrame * total + 1000)
                {
                    throw new IllegalStateException("ring livelocked: " + progress.get());
                }
                continue;
            }
            if (spuriousTimeout > 0 && random.nextDouble() < spuriousTimeout)
            {
                final int r = random.nextInt(ranks);
                sendIndex[r] = received[r];
                continue;
            }
            final int r = candidates[random.nextInt(count)];
            final byte[] next = frames.get(r).get(sendIndex[r]++);
            if (dropOnTheWayIn > 0 && random.nextDouble() < dropOnTheWayIn)
            {
                continue;
            }
            network.send(r, next);
            if (duplicate > 0 && random.nextDouble() < duplicate)
            {
                network.send(r, next);
            }
        }
    }

    /**
     * A frame of {@code connection} (by sending rank) with PSN index {@code index} reached its receiver.
     *
     * @return true if the receiver accepted it: the next frame it expected.
     */
    boolean accept(final int connection, final int index)
    {
        if (index == received[connection])
        {
            received[connection]++;
            return true;
        }
        return false;
    }

    String progress()
    {
        return "sent " + Arrays.toString(sendIndex) + " received " + Arrays.toString(received);
    }

    private boolean mayStart(final int rank, final int message)
    {
        final int predecessor = (rank + ranks - 1) % ranks;
        return message < window + received[predecessor] / msgLen;
    }

    private boolean allDelivered(final int total)
    {
        for (int r = 0; r < ranks; r++)
        {
            if (received[r] < total)
            {
                return false;
            }
        }
        return true;
    }
}
