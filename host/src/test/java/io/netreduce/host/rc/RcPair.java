package io.netreduce.host.rc;

import org.agrona.concurrent.CachedNanoClock;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;

/**
 * Test harness: two endpoints over a {@link TestLink}, one connected queue pair each, one manual clock.
 */
final class RcPair
{
    static final long MAC_A = 0x02_00_00_00_00_0AL;
    static final long MAC_B = 0x02_00_00_00_00_0BL;

    final CachedNanoClock clock = new CachedNanoClock();
    final TestLink link = new TestLink();
    final RcEndpoint a;
    final RcEndpoint b;
    final CompletionQueue cqA = new CompletionQueue(1024);
    final CompletionQueue cqB = new CompletionQueue(1024);
    final QueuePair qpA;
    final QueuePair qpB;
    final List<String> completionsA = new ArrayList<>();
    final List<String> completionsB = new ArrayList<>();
    final List<long[]> recordsA = new ArrayList<>();
    final List<long[]> recordsB = new ArrayList<>();
    long stepNs = 1_000;

    RcPair(final RcConfig configA, final RcConfig configB, final int psnA, final int psnB)
    {
        clock.update(1_000_000_000L);
        a = new RcEndpoint(link.a, configA, clock, ip("10.0.0.1"), MAC_A);
        b = new RcEndpoint(link.b, configB, clock, ip("10.0.0.2"), MAC_B);
        qpA = a.createQueuePair(cqA, cqA).startPsn(psnA);
        qpB = b.createQueuePair(cqB, cqB).startPsn(psnB);
        qpA.connect(qpB.localInfo(null));
        qpB.connect(qpA.localInfo(null));
    }

    RcPair(final RcConfig config)
    {
        this(config, config, 100, 5000);
    }

    static InetAddress ip(final String text)
    {
        try
        {
            return InetAddress.getByName(text);
        }
        catch (final UnknownHostException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    void step()
    {
        clock.advance(stepNs);
        a.doWork();
        b.doWork();
        cqA.poll(c -> record(c, completionsA, recordsA), 1024);
        cqB.poll(c -> record(c, completionsB, recordsB), 1024);
    }

    private static void record(final Completion c, final List<String> text, final List<long[]> records)
    {
        text.add(c.toString());
        records.add(new long[]{ c.wrId(), c.status(), c.opcode(), c.byteLength(), c.hasImmediate() ? 1 : 0,
            c.immediate() });
    }

    /**
     * Step until the condition holds; fail after maxSteps.
     */
    void runUntil(final BooleanSupplier condition, final int maxSteps)
    {
        for (int i = 0; i < maxSteps; i++)
        {
            if (condition.getAsBoolean())
            {
                return;
            }
            step();
        }
        if (!condition.getAsBoolean())
        {
            throw new AssertionError("condition not reached after " + maxSteps + " steps; A: " + qpA + " " +
                qpA.counters() + " / B: " + qpB + " " + qpB.counters() + " completionsA=" + completionsA +
                " completionsB=" + completionsB);
        }
    }

    void run(final int steps)
    {
        for (int i = 0; i < steps; i++)
        {
            step();
        }
    }
}
