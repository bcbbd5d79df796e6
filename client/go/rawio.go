//go:build linux && !race

package werk

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// rawIO reads and writes a TCP connection's socket, which is non-blocking, with raw system
// calls, waiting for it through the runtime's poller as net.Conn does (deadlines included).
// Through net.Conn, each read and write enters the scheduler's system-call state, and when the
// process was idle (waiting for the server's answer, as a producer mostly is) that wakes the
// runtime's monitor thread, which then sleeps and wakes again: a large part of a short
// exchange's processor time. Built without the race detector only: net.Conn tells it that what one
// goroutine wrote to a socket happens before what another reads from it, and raw calls do not.
type rawIO struct {
	rc syscall.RawConn
	// What the read or write under way is given and gets: the functions the poller calls
	// (made once, not once a call) read and set them.
	in, out         []byte
	got, written    int
	inErr, outErr   syscall.Errno
	readFD, writeFD func(fd uintptr) bool
}

// newRawIO is the raw reader and writer of c, false when c is not a TCP connection.
func newRawIO(c net.Conn) (io.ReadWriter, bool) {
	tcp, ok := c.(*net.TCPConn)
	if !ok {
		return nil, false
	}
	rc, err := tcp.SyscallConn()
	if err != nil {
		return nil, false
	}
	r := &rawIO{rc: rc}
	r.readFD, r.writeFD = r.readOnce, r.writeAll
	return r, true
}

// readOnce reads what the socket holds into r.in; false when it holds nothing yet.
func (r *rawIO) readOnce(fd uintptr) bool {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.in[0])),
			uintptr(len(r.in)))
		switch errno {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		r.got, r.inErr = int(n), errno
		return true
	}
}

// writeAll writes the rest of r.out; false when the socket takes no more for now.
func (r *rawIO) writeAll(fd uintptr) bool {
	for r.written < len(r.out) {
		rest := r.out[r.written:]
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&rest[0])),
			uintptr(len(rest)))
		switch errno {
		case 0:
			r.written += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			r.outErr = errno
			return true
		}
	}
	return true
}

func (r *rawIO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.in, r.got, r.inErr = p, 0, 0
	err := r.rc.Read(r.readFD)
	r.in = nil
	switch {
	case err != nil:
		return 0, err
	case r.inErr != 0:
		return 0, os.NewSyscallError("read", r.inErr)
	case r.got == 0:
		return 0, io.EOF
	}
	return r.got, nil
}

func (r *rawIO) Write(p []byte) (int, error) {
	r.out, r.written, r.outErr = p, 0, 0
	err := r.rc.Write(r.writeFD)
	r.out = nil
	if err == nil && r.outErr != 0 {
		err = os.NewSyscallError("write", r.outErr)
	}
	return r.written, err
}
