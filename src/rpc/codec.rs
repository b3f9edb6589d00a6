//! Framing: one message per `\n`-terminated line, with a bound on line length.
//!
//! Why our own decoder rather than tokio-util's `LinesCodec`: that one yields
//! `String`s (so invalid UTF-8 is an I/O-level error, not a line we can answer),
//! and it reports an over-long line as a decode *error*, after which a
//! `FramedRead` stops. ACP wants both cases answered with an error response and
//! the connection kept alive, so this decoder works on bytes and reports an
//! over-long line as an ordinary frame, [`Frame::TooLong`], then skips the rest of
//! that line without ever holding more than `max` bytes of it.

use std::io;
use tokio_util::bytes::{Buf, BytesMut};
use tokio_util::codec::Decoder;

/// One unit of input as the connection sees it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A complete line without its terminator (`\n` or `\r\n`); not yet checked
    /// for UTF-8.
    Line(BytesMut),
    /// A line longer than the limit began here; its bytes are being discarded up
    /// to and including the next `\n`.
    TooLong,
}

/// Splits a byte stream into [`Frame`]s; see the module docs.
#[derive(Debug)]
pub(crate) struct LineCodec {
    max: usize,
    /// How much of the buffer is already known to hold no `\n`, so a long line
    /// arriving in many small reads is scanned once, not once per read.
    scanned: usize,
    /// Inside an over-long line: drop everything up to the next `\n`.
    discarding: bool,
}

impl LineCodec {
    /// A codec that accepts lines of at most `max` bytes (terminator excluded;
    /// a `\r` before the `\n` counts towards the limit).
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            scanned: 0,
            discarding: false,
        }
    }

    fn line(mut bytes: BytesMut) -> Frame {
        if bytes.last() == Some(&b'\r') {
            bytes.truncate(bytes.len() - 1);
        }
        Frame::Line(bytes)
    }
}

fn find_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'\n')
}

impl Decoder for LineCodec {
    type Item = Frame;
    type Error = io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> io::Result<Option<Frame>> {
        if self.discarding {
            match find_newline(buf) {
                Some(i) => {
                    buf.advance(i + 1);
                    self.discarding = false;
                }
                None => {
                    // Nothing of this line is worth keeping.
                    buf.clear();
                    return Ok(None);
                }
            }
        }
        // Only the first max+1 bytes matter: a `\n` among them ends a line that
        // fits; if there is none, the line is too long whatever follows.
        let limit = buf.len().min(self.max.saturating_add(1));
        match find_newline(&buf[self.scanned.min(limit)..limit]) {
            Some(offset) => {
                let end = self.scanned + offset;
                self.scanned = 0;
                let mut line = buf.split_to(end + 1);
                line.truncate(end);
                Ok(Some(Self::line(line)))
            }
            None if buf.len() > self.max => {
                buf.advance(limit);
                self.scanned = 0;
                self.discarding = true;
                Ok(Some(Frame::TooLong))
            }
            None => {
                self.scanned = limit;
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> io::Result<Option<Frame>> {
        if let Some(frame) = self.decode(buf)? {
            return Ok(Some(frame));
        }
        self.scanned = 0;
        if self.discarding {
            // The over-long line was already reported when it crossed the limit.
            self.discarding = false;
            buf.clear();
            return Ok(None);
        }
        if buf.is_empty() {
            return Ok(None);
        }
        // A last line without a terminator still counts (`decode` has already
        // made sure it is within the limit).
        Ok(Some(Self::line(buf.split())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(codec: &mut LineCodec, buf: &mut BytesMut, eof: bool) -> Vec<Frame> {
        let mut out = Vec::new();
        loop {
            let next = if eof {
                codec.decode_eof(buf)
            } else {
                codec.decode(buf)
            };
            match next.unwrap() {
                Some(f) => out.push(f),
                None => return out,
            }
        }
    }

    fn line(s: &str) -> Frame {
        Frame::Line(BytesMut::from(s))
    }

    #[test]
    fn splits_lines_and_strips_cr() {
        let mut c = LineCodec::new(100);
        let mut buf = BytesMut::from("a\r\nb\n\nc");
        assert_eq!(
            frames(&mut c, &mut buf, false),
            vec![line("a"), line("b"), line("")]
        );
        assert_eq!(frames(&mut c, &mut buf, true), vec![line("c")]);
        assert!(buf.is_empty());
    }

    #[test]
    fn a_line_of_exactly_max_fits_and_one_more_does_not() {
        let mut c = LineCodec::new(3);
        let mut buf = BytesMut::from("abc\nabcd\nok\n");
        assert_eq!(
            frames(&mut c, &mut buf, false),
            vec![line("abc"), Frame::TooLong, line("ok")]
        );
    }

    #[test]
    fn too_long_line_is_reported_once_and_discarded_across_reads() {
        let mut c = LineCodec::new(4);
        let mut buf = BytesMut::from("012");
        assert!(frames(&mut c, &mut buf, false).is_empty());
        buf.extend_from_slice(b"3456");
        assert_eq!(frames(&mut c, &mut buf, false), vec![Frame::TooLong]);
        buf.extend_from_slice(b"789");
        assert!(frames(&mut c, &mut buf, false).is_empty());
        assert!(buf.is_empty(), "discarded bytes are not kept");
        buf.extend_from_slice(b"9\nnext\ntail");
        assert_eq!(frames(&mut c, &mut buf, false), vec![line("next")]);
        assert_eq!(frames(&mut c, &mut buf, true), vec![line("tail")]);
    }

    #[test]
    fn over_long_last_line_at_eof_is_dropped_after_its_report() {
        let mut c = LineCodec::new(2);
        let mut buf = BytesMut::from("abcdef");
        assert_eq!(frames(&mut c, &mut buf, true), vec![Frame::TooLong]);
        assert!(buf.is_empty());
    }
}
