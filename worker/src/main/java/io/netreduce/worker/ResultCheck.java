package io.netreduce.worker;

import io.netreduce.host.allreduce.Arithmetic;
import io.netreduce.host.allreduce.Tensor;
import io.netreduce.host.allreduce.TensorPattern;
import io.netreduce.host.switchml.ExponentQuantizer;
import io.netreduce.protocol.element.ElementType;

import java.util.Locale;

/**
 * Checks a call's results bit for bit against the exact sum, recomputed from every rank's input pattern
 * ({@link TensorPattern}) in the order the reduction adds the inputs, rounded to the element type at each step;
 * SwitchML's fp32 results against the exact sum within {@link ExponentQuantizer#errorBound}.
 */
final class ResultCheck
{
    private final ElementType elementType;
    private final long seed;
    private final int world;

    /**
     * @param elementType the tensors' element type.
     * @param seed        the input patterns' seed (--seed).
     * @param world       the number of ranks (--world; hosts with --local-workers).
     */
    ResultCheck(final ElementType elementType, final long seed, final int world)
    {
        this.elementType = elementType;
        this.seed = seed;
        this.world = world;
    }

    /**
     * @param netreduce     NetReduce (rank order, or the hierarchy's order with racks) rather than the ring
     *                      algorithm (ring order, chunk by chunk).
     * @param chunkElements the ring algorithm's chunk, in elements.
     * @param rackFirst     the first rank of each rack (--racks), or null for a flat ring.
     * @return null if every element is the exact expected sum, else a description of the first that is not.
     */
    String check(
        final Tensor tensor, final boolean netreduce, final int chunkElements, final int[] rackFirst,
        final int iteration)
    {
        final Arithmetic.Inputs inputs = (r, index) -> TensorPattern.bits(elementType, seed, r, iteration, index);
        for (int i = 0; i < tensor.elements(); i++)
        {
            final int expected = !netreduce ? Arithmetic.ringOrderSum(elementType, world, chunkElements, inputs, i) :
                rackFirst != null ? Arithmetic.hierarchicalSum(elementType, world, rackFirst, inputs, i) :
                Arithmetic.rankOrderSum(elementType, world, inputs, i);
            final int actual = Arithmetic.get(tensor, i);
            if (actual != expected)
            {
                return String.format(Locale.ROOT, "element %d: expected 0x%08x (%s) got 0x%08x (%s)", i, expected,
                    Arithmetic.toFloat(elementType, expected), actual, Arithmetic.toFloat(elementType, actual));
            }
        }
        return null;
    }

    /**
     * SwitchML int32: the sum wraps, as the switch's does.
     *
     * @return null if every element is the exact sum of the ranks' inputs, else the first that is not.
     */
    String checkSwitchMl(final int[] tensor, final int iteration)
    {
        for (int i = 0; i < tensor.length; i++)
        {
            int expected = 0;
            for (int r = 0; r < world; r++)
            {
                expected += TensorPattern.bits(ElementType.INT32, seed, r, iteration, i);
            }
            if (tensor[i] != expected)
            {
                return String.format(Locale.ROOT, "element %d: expected %d got %d", i, expected, tensor[i]);
            }
        }
        return null;
    }

    /**
     * SwitchML fp32: each packet's block of {@code elementsPerPacket} elements was scaled with the largest of the
     * ranks' block exponents ({@link ExponentQuantizer}); every element must be within the bound of the exact sum of
     * the ranks' inputs (a float64 sum: the patterns are multiples of 2^-23 in [-1, 1), so it is exact).
     *
     * @return null if every element is within the bound, else the first that is not.
     */
    String checkSwitchMl(final float[] tensor, final int elementsPerPacket, final int iteration)
    {
        final ExponentQuantizer quantizer = new ExponentQuantizer(world);
        final float[][] blocks = new float[world][elementsPerPacket];
        for (int from = 0; from < tensor.length; from += elementsPerPacket)
        {
            final int count = Math.min(elementsPerPacket, tensor.length - from);
            int exponent = ExponentQuantizer.MIN_EXPONENT;
            for (int r = 0; r < world; r++)
            {
                for (int e = 0; e < count; e++)
                {
                    blocks[r][e] = Float.intBitsToFloat(TensorPattern.bits(ElementType.FP32, seed, r, iteration,
                        from + e));
                }
                exponent = Math.max(exponent, ExponentQuantizer.exponent(blocks[r], 0, count));
            }
            for (int e = 0; e < count; e++)
            {
                double exact = 0;
                for (int r = 0; r < world; r++)
                {
                    exact += blocks[r][e];
                }
                final double bound = quantizer.errorBound(exponent, exact);
                final float actual = tensor[from + e];
                if (!(Math.abs(actual - exact) <= bound))
                {
                    return String.format(Locale.ROOT, "element %d: exact sum %s got %s, error %.3g above the " +
                        "bound %.3g (block exponent %d)", from + e, exact, actual, Math.abs(actual - exact), bound,
                        exponent);
                }
            }
        }
        return null;
    }

    /**
     * @return null if every local worker's tensor holds the exact hierarchical sum (one rack per host), else a
     *         description of the first element that does not.
     */
    String checkParallel(final Tensor[] tensors, final int elements, final int[] hostFirst, final int iteration)
    {
        final int n = tensors.length;
        final Arithmetic.Inputs inputs = (r, index) -> TensorPattern.bits(elementType, seed, r, iteration, index);
        for (int e = 0; e < elements; e++)
        {
            final int expected = Arithmetic.hierarchicalSum(elementType, world * n, hostFirst, inputs, e);
            for (int j = 0; j < n; j++)
            {
                final int actual = Arithmetic.get(tensors[j], e);
                if (actual != expected)
                {
                    return String.format(Locale.ROOT, "local worker %d element %d: expected 0x%08x got 0x%08x", j, e,
                        expected, actual);
                }
            }
        }
        return null;
    }
}
