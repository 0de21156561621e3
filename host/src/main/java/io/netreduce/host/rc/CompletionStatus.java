package io.netreduce.host.rc;

/**
 * Work completion status codes, named after their ibverbs counterparts ({@code IBV_WC_*}).
 */
public final class CompletionStatus
{
    public static final int SUCCESS = 0;
    /** A received SEND was longer than the posted receive buffer. */
    public static final int LOCAL_LENGTH_ERROR = 1;
    /** The responder NAKed with "remote access error" (bad R_Key, VA or length). */
    public static final int REMOTE_ACCESS_ERROR = 2;
    /** The responder NAKed with "invalid request" (opcode sequence or length violation). */
    public static final int REMOTE_INVALID_REQUEST = 3;
    /** The responder NAKed with "remote operational error". */
    public static final int REMOTE_OPERATION_ERROR = 4;
    /** The retransmission timer expired more than {@link RcConfig#retryCount()} times in a row. */
    public static final int RETRY_EXCEEDED = 5;
    /** The responder answered RNR NAK more than {@link RcConfig#rnrRetryCount()} times in a row. */
    public static final int RNR_RETRY_EXCEEDED = 6;
    /** The work request was outstanding when the queue pair entered the error state. */
    public static final int FLUSH_ERROR = 7;

    private CompletionStatus()
    {
    }

    public static String name(final int status)
    {
        return switch (status)
        {
            case SUCCESS -> "SUCCESS";
            case LOCAL_LENGTH_ERROR -> "LOCAL_LENGTH_ERROR";
            case REMOTE_ACCESS_ERROR -> "REMOTE_ACCESS_ERROR";
            case REMOTE_INVALID_REQUEST -> "REMOTE_INVALID_REQUEST";
            case REMOTE_OPERATION_ERROR -> "REMOTE_OPERATION_ERROR";
            case RETRY_EXCEEDED -> "RETRY_EXCEEDED";
            case RNR_RETRY_EXCEEDED -> "RNR_RETRY_EXCEEDED";
            case FLUSH_ERROR -> "FLUSH_ERROR";
            default -> "STATUS_" + status;
        };
    }
}
