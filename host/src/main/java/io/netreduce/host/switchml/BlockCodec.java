package io.netreduce.host.switchml;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * What a call's packets carry, for {@link SwitchMlWorker}: the tensor's blocks of k elements on the wire and the
 * results back into the tensor. The worker owns the packets (pool indices, clocking, retransmission); a codec only
 * says how many packets a tensor needs and fills and empties them. Packet p is either block p (no look-ahead) or,
 * after a leading batch of L packets that carry exponents only, block p − L.
 * <p>
 * Encoding must give the same bytes each time a packet is encoded again (a retransmission) until its result is in.
 */
abstract sealed class BlockCodec permits BlockCodec.Int32, BlockCodec.Fp32
{
    final int elementsPerPacket;
    int length;
    int blocks;
    int lead;

    BlockCodec(final int elementsPerPacket)
    {
        this.elementsPerPacket = elementsPerPacket;
    }

    /**
     * @return whether a call opens with a batch of packets that carry only the next blocks' exponents.
     */
    abstract boolean looksAhead();

    /**
     * A call on the tensor last given begins: its {@link #blocks} behind a leading batch of {@code lead} packets (0
     * without look-ahead).
     */
    void start(final int lead)
    {
        this.lead = lead;
    }

    /**
     * Write packet {@code packet}'s elements at {@code at} (zeros where it carries no block or past the tensor's end).
     *
     * @return the exponent byte the packet carries.
     */
    abstract int encode(int packet, MutableDirectBuffer buffer, int at);

    /**
     * Packet {@code packet}'s result arrived with these elements at {@code at} and this exponent byte.
     */
    abstract void decode(int packet, DirectBuffer buffer, int at, int exponent);

    final int blocksOf(final int length)
    {
        return (int)(((long)length + elementsPerPacket - 1) / elementsPerPacket);
    }

    /**
     * @return elements of block {@code block} inside the tensor (the last block may be short).
     */
    final int count(final int block)
    {
        return Math.min(elementsPerPacket, length - block * elementsPerPacket);
    }

    final void zeros(final MutableDirectBuffer buffer, final int at, final int fromElement)
    {
        buffer.setMemory(at + fromElement * Integer.BYTES, (elementsPerPacket - fromElement) * Integer.BYTES, (byte)0);
    }

    /**
     * int32 elements as they are: the switch's sum wraps as Java's int addition does, so results are exact.
     */
    static final class Int32 extends BlockCodec
    {
        private int[] tensor;

        Int32(final int elementsPerPacket)
        {
            super(elementsPerPacket);
        }

        /**
         * @param length the call's elements: the first {@code length} of {@code tensor}.
         */
        void tensor(final int[] tensor, final int length)
        {
            this.tensor = tensor;
            this.length = length;
            this.blocks = blocksOf(length);
        }

        @Override
        boolean looksAhead()
        {
            return false;
        }

        @Override
        int encode(final int packet, final MutableDirectBuffer buffer, final int at)
        {
            final int from = packet * elementsPerPacket;
            final int count = count(packet);
            for (int i = 0; i < count; i++)
            {
                buffer.putInt(at + i * Integer.BYTES, tensor[from + i], BIG_ENDIAN);
            }
            zeros(buffer, at, count);
            return 0;
        }

        @Override
        void decode(final int packet, final DirectBuffer buffer, final int at, final int exponent)
        {
            final int from = packet * elementsPerPacket;
            final int count = count(packet);
            for (int i = 0; i < count; i++)
            {
                tensor[from + i] = buffer.getInt(at + i * Integer.BYTES, BIG_ENDIAN);
            }
        }
    }

    /**
     * fp32 through {@link ExponentQuantizer} with the client's exponent look-ahead: packet p carries, in exponent
     * byte e0, the exponent of block p (if there is one; else {@link ExponentQuantizer#NO_EXPONENT}) and, from
     * p = L on, block p − L quantized with the exponent that the result of packet p − L brought back (the switch's
     * maximum of the workers' exponents for that block). The leading L packets carry zeros. Each of the L windows
     * keeps the one exponent it is between: set by the result of packet p, used to encode packet p + L (and its
     * retransmissions) and to decode that packet's result, then replaced by the exponent that result brings.
     */
    static final class Fp32 extends BlockCodec
    {
        private final ExponentQuantizer quantizer;
        private final int[] windowExponent;
        private float[] tensor;

        Fp32(final int elementsPerPacket, final ExponentQuantizer quantizer, final int windows)
        {
            super(elementsPerPacket);
            this.quantizer = quantizer;
            this.windowExponent = new int[windows];
        }

        /**
         * @param length the call's elements: the first {@code length} of {@code tensor}.
         * @throws IllegalArgumentException if an element has no block exponent (NaN, infinite, 2<sup>127</sup> or
         *                                  more in magnitude): nothing has been sent.
         */
        void tensor(final float[] tensor, final int length)
        {
            ExponentQuantizer.requireQuantizable(tensor, 0, length);
            this.tensor = tensor;
            this.length = length;
            this.blocks = blocksOf(length);
        }

        @Override
        boolean looksAhead()
        {
            return true;
        }

        @Override
        int encode(final int packet, final MutableDirectBuffer buffer, final int at)
        {
            if (packet >= lead)
            {
                final int block = packet - lead;
                final int count = count(block);
                quantizer.quantize(tensor, block * elementsPerPacket, count, windowExponent[packet % lead], buffer, at);
                zeros(buffer, at, count);
            }
            else
            {
                zeros(buffer, at, 0);
            }
            return packet < blocks ?
                ExponentQuantizer.exponent(tensor, packet * elementsPerPacket, count(packet)) :
                ExponentQuantizer.NO_EXPONENT;
        }

        @Override
        void decode(final int packet, final DirectBuffer buffer, final int at, final int exponent)
        {
            final int window = packet % lead;
            if (packet >= lead)
            {
                final int block = packet - lead;
                quantizer.dequantize(buffer, at, count(block), windowExponent[window], tensor,
                    block * elementsPerPacket);
            }
            if (packet < blocks)
            {
                windowExponent[window] = exponent;
            }
        }
    }
}
