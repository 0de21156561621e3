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
 * eventfd. A trainer that asked for it at {@code open} ({@code "inputRelease": true}) is answered as soon as the
 * sums are in the output area, before the call's own writes have been acknowledged, and told separately when the
 * input area is its own again: the sidecar writes the call's sequence into the released word (a release store)
 * once nothing will read the input area for that call, not even a retransmission, and rings the answer eventfd again
 * if that came after the answer. The trainer reads its sums meanwhile and refills the input area only after the
 * released word holds the last call's sequence; a trainer that did not ask is answered when both are done, the
 * released word written with the answer. A failed call's error still goes over the socket as a JSON line, written
 * before the answer, so the
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
 *  32  u32  released sequence: the input area may be  written by the sidecar (release), before or after
 *           refilled                                    the answer
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
    static final int RELEASED_SEQUENCE_OFFSET = 32;
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
     * Answer the request taken last: the released word if its input area is free already, status and time, then the
     * sequence (release), then the trainer's bell.
     *
     * @param released whether nothing will read the call's input area any more (else {@link #release()} follows).
     */
    void answer(final int status, final long micros, final boolean released)
    {
        if (released)
        {
            page.putIntOrdered(RELEASED_SEQUENCE_OFFSET, pendingSequence);
        }
        page.putLong(MICROS_OFFSET, micros);
        page.putInt(STATUS_OFFSET, status);
        page.putIntOrdered(ANSWER_SEQUENCE_OFFSET, pendingSequence);
        answer.ring();
    }

    /**
     * The call answered last (with {@code released} false) no longer needs its input area: write its sequence into
     * the released word and ring the trainer's bell, which may be waiting to refill the area.
     */
    void release()
    {
        page.putIntOrdered(RELEASED_SEQUENCE_OFFSET, pendingSequence);
        answer.ring();
    }
}
