package io.netreduce.host.rc;

import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.port.PortCounters;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.ArrayDeque;

/**
 * Test double: two back-to-back in-memory ports. A frame sent on one end and flushed is received on the other,
 * after an optional {@link Tap} that may inspect, rewrite or drop it.
 */
final class TestLink
{
    interface Tap
    {
        /**
         * @return false to drop the frame.
         */
        boolean onFrame(UnsafeBuffer frame, int length);
    }

    final End a = new End("a");
    final End b = new End("b");

    TestLink()
    {
        a.peer = b;
        b.peer = a;
    }

    static final class End implements PacketPort
    {
        private final String name;
        private final ArrayDeque<byte[]> pending = new ArrayDeque<>();
        private final ArrayDeque<byte[]> inbox = new ArrayDeque<>();
        private End peer;
        private final PortCounters counters = new PortCounters();
        Tap tap = (frame, length) -> true;
        long sent;
        /** The queue pairs the endpoint last asked this port to receive for ({@link #receiveOnlyQueuePairs}). */
        int[] queuePairsAsked;

        End(final String name)
        {
            this.name = name;
        }

        @Override
        public String name()
        {
            return name;
        }

        @Override
        public boolean receiveOnlyQueuePairs(final int[] qpns, final int count)
        {
            queuePairsAsked = java.util.Arrays.copyOf(qpns, count);
            return true;
        }

        @Override
        public int receive(final FrameHandler handler, final int limit)
        {
            int count = 0;
            while (count < limit && !inbox.isEmpty())
            {
                final byte[] frame = inbox.poll();
                handler.onFrame(new UnsafeBuffer(frame), 0, frame.length, 0);
                count++;
            }
            return count;
        }

        @Override
        public boolean send(final DirectBuffer buffer, final int offset, final int length)
        {
            final byte[] copy = new byte[length];
            buffer.getBytes(offset, copy);
            pending.add(copy);
            return true;
        }

        private final UnsafeBuffer claim = new UnsafeBuffer(new byte[16 * 1024]);
        private int claimLength;

        @Override
        public int tryClaim(final int length)
        {
            claimLength = length;
            return 0;
        }

        @Override
        public org.agrona.MutableDirectBuffer claimBuffer()
        {
            return claim;
        }

        @Override
        public void commit()
        {
            send(claim, 0, claimLength);
        }

        @Override
        public int flush()
        {
            int count = 0;
            while (!pending.isEmpty())
            {
                final byte[] frame = pending.poll();
                sent++;
                if (tap.onFrame(new UnsafeBuffer(frame), frame.length))
                {
                    peer.inbox.add(frame);
                }
                count++;
            }
            return count;
        }

        @Override
        public PortCounters counters()
        {
            return counters;
        }

        @Override
        public void close()
        {
        }
    }
}
