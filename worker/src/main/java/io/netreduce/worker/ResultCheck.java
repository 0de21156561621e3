package io.netreduce.worker;

import io.netreduce.host.allreduce.Arithmetic;
import io.netreduce.host.allreduce.Tensor;
import io.netreduce.host.allreduce.TensorPattern;
import io.netreduce.protocol.element.ElementType;

import java.util.Locale;

/**
 * Checks a call's results bit for bit against the exact sum, recomputed from every rank's input pattern
 * ({@link TensorPattern}) in the order the reduction adds the inputs, rounded to the element type at each step.
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
