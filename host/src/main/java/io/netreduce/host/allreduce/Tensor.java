package io.netreduce.host.allreduce;

import io.netreduce.protocol.element.ElementType;
import org.agrona.MutableDirectBuffer;

/**
 * A dense one-dimensional tensor in (normally off-heap) memory: {@code elements} values of {@code type},
 * little-endian, starting at {@code offset} of {@code buffer}. The all-reduce operations reduce it in place.
 *
 * @param type     element type.
 * @param buffer   memory holding the values (an Agrona buffer over a direct ByteBuffer or native address).
 * @param offset   byte offset of element 0.
 * @param elements number of elements.
 */
public record Tensor(ElementType type, MutableDirectBuffer buffer, int offset, int elements)
{
    public Tensor
    {
        if (offset < 0 || elements < 0 || (long)offset + (long)elements * type.size() > buffer.capacity())
        {
            throw new IllegalArgumentException("tensor of " + elements + " " + type + " at offset " + offset +
                " does not fit a buffer of " + buffer.capacity() + " bytes");
        }
    }

    /**
     * @return the tensor's size in bytes.
     */
    public int byteLength()
    {
        return elements * type.size();
    }
}
