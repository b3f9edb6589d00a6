sudo A=1 -u root -s rm x; su root -c 'rm y'; runuser -u nobody -- rm z; unshare -mr rm a; nsenter -t1 -m rm b; chroot --user 0:0 / rm c; setpriv --n rm d; script -qc 'rm e' /dev/null; watch -x rm f
