bash <<'EOF'
rm -rf x
EOF
sh <<< 'rm y'; echo 'rm z' | bash -s; bash - <<E
rm $w
E
