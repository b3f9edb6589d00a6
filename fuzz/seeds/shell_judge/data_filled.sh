echo 'rm x' | xargs -I{} sh -c '{}'; xargs sh -c <<< 'rm y'; find /usr/bin -name rm -exec {} z \;; alias r=rm; trap 'rm t' EXIT
