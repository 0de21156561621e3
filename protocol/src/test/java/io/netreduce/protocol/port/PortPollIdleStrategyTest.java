package io.netreduce.protocol.port;

import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

import static org.junit.jupiter.api.Assertions.assertEquals;

class PortPollIdleStrategyTest
{
    @Test
    void shouldSpinThenYieldThenAskTheLimitAndBlock()
    {
        final AtomicInteger asked = new AtomicInteger();
        final PortPollIdleStrategy strategy = new PortPollIdleStrategy(new PortPoller(List.of()), 2, 3, () ->
        {
            asked.incrementAndGet();
            return 1;
        });

        for (int i = 0; i < 5; i++)
        {
            strategy.idle(0);
        }
        assertEquals(3, strategy.yielded());
        assertEquals(0, asked.get());
        assertEquals(0, strategy.blocks());

        strategy.idle(0);
        assertEquals(1, asked.get());
        assertEquals(1, strategy.blocks());
    }

    @Test
    void shouldSpinAgainFromTheStartWhenTheLimitMadeWorkInsteadOfBlocking()
    {
        final AtomicInteger asked = new AtomicInteger();
        final PortPollIdleStrategy strategy = new PortPollIdleStrategy(new PortPoller(List.of()), 2, 1, () ->
            asked.incrementAndGet() == 1 ? PortPollIdleStrategy.RESTART : 1);

        for (int i = 0; i < 4; i++) // 2 spins, 1 yield, then the limit says RESTART
        {
            strategy.idle(0);
        }
        assertEquals(1, asked.get());
        assertEquals(0, strategy.blocks());
        assertEquals(1, strategy.yielded());

        for (int i = 0; i < 4; i++) // the whole phase again: 2 spins, 1 yield, then a block
        {
            strategy.idle(0);
        }
        assertEquals(2, asked.get());
        assertEquals(1, strategy.blocks());
        assertEquals(2, strategy.yielded());
    }

    @Test
    void shouldYieldInsteadOfBlockingWhenTheLimitIsUnderAMillisecond()
    {
        final PortPollIdleStrategy strategy = new PortPollIdleStrategy(new PortPoller(List.of()), 0, 0, () -> 0);

        strategy.idle(0);
        strategy.idle(0);

        assertEquals(0, strategy.blocks());
        assertEquals(2, strategy.yielded());
    }
}
