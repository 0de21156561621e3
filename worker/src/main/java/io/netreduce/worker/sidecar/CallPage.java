package io.netreduce.worker.sidecar;

import io.netreduce.protocol.port.Doorbell;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;

/**
 * The call doorbell: an all-reduce request and its answer as words in a page of the shared memory file, instead of
 * a JSON line each way over the control socket. The trainer writes a call's element count, then a new sequence
 * number with its complement beside it, and rings the sidecar's {@link Doorbell} (an eventfd the trainer made and the sidecar polls
 * with its port), so the request wakes the endpoint thread directly and needs no parsing; the sidecar answers by
 * writing the status and its own time, then the sequence number (a release store), and ringing the trainer's answer
 * eventfd. A failed call's error still goes over the socket as a JSON line, written before the answer, so the
 * trainer reads it once it sees the failed status; the socket also tells a waiting trainer the sidecar died (end of
 * stream). Control ({@code open}, {@code connect}, {@code stats}, {@code close}) stays JSON.
 * <p>
 * Layout (native byte order, from the page's start; the page's offset in the file is the open's {@code doorbell}):
 * <pre>
 *   0  u64  request: (~sequence &lt;&lt; 32) | sequence    written by the trainer after the elements
 *   8  u32  answered sequence                         written by the sidecar last (release)
 *  12  u32  status: 0 ok, 1 failed (error line on the socket)
 *  16  u64  microseconds the call took in the sidecar
 *  24  u64  elements of the call                      written by the trainer first
 * </pre>
 * The complement is there because CPython's {@code struct} writes a word a byte at a time: a request word is taken
 * only once its two halves agree, so a word caught half-written is not a request. The trainer's stores become
 * visible in program order on x86-64 (TSO), so the elements are there when the request word is; the Python side
 * uses the page on x86-64 only.
 * Per call, not per packet; only the endpoint thread touches it on this side.
 */
final class CallPage
{
    /** Bytes of the file the page takes (the trainer maps a whole page; these are all that is used). */
    static final int LENGTH = 64;
    static final int REQUEST_OFFSET = 0;
    static final int ANSWER_SEQUENCE_OFFSET = 8;
    static final int STATUS_OFFSET = 12;
    static final int MICROS_OFFSET = 16;
    static final int ELEMENTS_OFFSET = 24;
    static final int STATUS_OK = 0;
    static final int STATUS_FAILED = 1;

    private final UnsafeBuffer page;
    private final Doorbell answer;
    private int lastSequence;
    private int pendingSequence;

    /**
     * @param mapped the page, mapped from the shared file.
     * @param answer rung after each answer (the trainer's eventfd; the trainer owns it, this closes nothing).
     */
    CallPage(final ByteBuffer mapped, final Doorbell answer)
    {
        this.page = new UnsafeBuffer(mapped);
        this.answer = answer;
        // A page the trainer has not used yet holds sequence 0; whatever is there now is not a request.
        lastSequence = (int)page.getLongVolatile(REQUEST_OFFSET);
    }

    /**
     * @return the element count of a request the trainer posted since the last one taken, or -1 if none.
     */
    long takeRequest()
    {
        final long word = page.getLongVolatile(REQUEST_OFFSET);
        final int sequence = (int)word;
        if (sequence == lastSequence || (int)(word >>> 32) != ~sequence)
        {
            return -1; // none, or one being written
        }
        lastSequence = sequence;
        pendingSequence = sequence;
        return page.getLongVolatile(ELEMENTS_OFFSET);
    }

    /**
     * Answer the request taken last: status and time first, then the sequence (release), then the trainer's bell.
     */
    void answer(final int status, final long micros)
    {
        page.putLong(MICROS_OFFSET, micros);
        page.putInt(STATUS_OFFSET, status);
        page.putIntOrdered(ANSWER_SEQUENCE_OFFSET, pendingSequence);
        answer.ring();
    }
}
