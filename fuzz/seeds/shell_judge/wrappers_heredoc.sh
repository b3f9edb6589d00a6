sudo env FOO=1 nohup timeout 5 rm -r a; (cd /; ls) || { cat <<EOF
rm
EOF
}