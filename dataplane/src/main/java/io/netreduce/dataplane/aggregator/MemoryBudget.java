package io.netreduce.dataplane.aggregator;

/**
 * A lane's aggregator memory budget ({@code appliance.dataplane.memoryBudget}), shared by every protocol's tables:
 * NetReduce's ring regions and SwitchML's slot pools draw on the same bytes. Changed only by the dataplane thread,
 * when it installs or removes a table.
 */
public final class MemoryBudget
{
    private final long budget;
    private long used;

    public MemoryBudget(final long budget)
    {
        this.budget = budget;
    }

    public long budget()
    {
        return budget;
    }

    public long used()
    {
        return used;
    }

    /**
     * @return whether {@code bytes} more fit the budget.
     */
    public boolean fits(final long bytes)
    {
        return bytes <= budget - used;
    }

    /**
     * Take {@code bytes} of the budget for a table of {@code what}.
     *
     * @throws IllegalArgumentException if they do not fit; the message gives the arithmetic.
     */
    public void take(final long bytes, final String what)
    {
        if (!fits(bytes))
        {
            throw new IllegalArgumentException(what + " needs " + bytes + " bytes of aggregator memory; " + used +
                " of the budget's " + budget + " are in use (appliance.dataplane.memoryBudget)");
        }
        used += bytes;
    }

    /**
     * Give back {@code bytes} a removed table held (all of it when the tables are closed).
     */
    public void release(final long bytes)
    {
        used = Math.max(0, used - bytes);
    }
}
